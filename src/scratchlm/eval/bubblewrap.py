"""The bubblewrap command line that runs one candidate: its namespaces and the files it can see.

What the candidate sees is built from an empty tmpfs root, never from the host's root with parts hidden:
- read-only: /usr (without /usr/local), the /bin, /lib, /lib64, /sbin links or folders as the host has them,
  /etc/ld.so.cache (the loader finds multiarch libraries with it), and the interpreter's own prefix when it
  lives elsewhere (pyenv under /root, conda under a home), its site-packages masked: the standard library only;
- writable: a private tmpfs at /tmp of a fixed size, the working directory; /dev holds only null, zero,
  random, urandom, tty and a pty; /proc is the new PID namespace's own;
- nothing else: no /etc (no passwd, shadow, hosts), no /home, no /root, no /run (no host sockets), no workdir.

Namespaces: PID (bubblewrap's init is PID 1; when it dies every process in the namespace dies with it), mount,
network (only a loopback of its own: no TCP to the host, no abstract Unix sockets), IPC, UTS, cgroup. A user
namespace too when invoked by a normal user; invoked as root, bubblewrap makes none (the candidate leaves uid 0
for the host's nobody instead, in sandbox_child.py, keeping only the two capabilities that needs until then).
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

NOBODY = 65534
SANDBOX_DIR = "/sandbox"  # the candidate's file, read-only
CANDIDATE = f"{SANDBOX_DIR}/candidate.py"
WORK_DIR = "/tmp"  # the only writable place
OWN_PATHS = ("/", WORK_DIR, SANDBOX_DIR, "/dev", "/proc", "/etc")  # made for the sandbox, not the host's
ENV = {"PATH": "/usr/bin:/bin", "HOME": WORK_DIR, "TMPDIR": WORK_DIR, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
       "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Bubblewrap:
    exe: str
    version: str
    sized_tmpfs: bool  # --size (bubblewrap >= 0.7): without it /tmp is bounded by file size only, per file
    disable_userns: bool  # --disable-userns (>= 0.8): no nested user namespace, less kernel to attack

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0


@lru_cache(maxsize=4)
def features(exe: str) -> Bubblewrap:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
    helptext = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
    return Bubblewrap(exe, out[-1] if out else "unknown", "--size" in helptext, "--disable-userns" in helptext)


def interpreter() -> Path:
    """The real interpreter binary: a venv's python is a link to it, and the venv itself is not visible."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(base))


def _parents(path: Path) -> list[Path]:
    return [p for p in reversed(path.parents) if p != Path("/")]


def interpreter_paths() -> list[Path]:
    """The interpreter's prefix and binary, each unless /usr (bound whole) or the prefix already holds it."""
    prefix = Path(os.path.realpath(sys.base_prefix))
    exe = interpreter()
    paths = [prefix] + ([] if exe.is_relative_to(prefix) else [exe])
    return [p for p in paths if not (p.is_relative_to("/usr") and not p.is_relative_to("/usr/local"))]


@lru_cache(maxsize=1)
def _readonly_view() -> tuple[str, ...]:
    """The same for every candidate of this process: built once."""
    args = ["--ro-bind", "/usr", "/usr"]
    if Path("/usr/local").is_dir():
        args += ["--tmpfs", "/usr/local"]
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin"):
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    if Path("/etc/ld.so.cache").exists():
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for extra in interpreter_paths():
        # Folders made on the tmpfs root: 0755, so nobody can walk to the prefix (the host's /root is 0700).
        for parent in _parents(extra):
            if str(parent) not in ("/usr", "/usr/local"):
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", str(extra), str(extra)]
    for key in ("purelib", "platlib"):  # the base interpreter's installed packages: not the standard library
        site = Path(sysconfig.get_path(key, vars={"base": sys.base_prefix, "platbase": sys.base_prefix}))
        if site.is_dir():
            args += ["--tmpfs", str(site)]
    return tuple(args)


def command(bw: Bubblewrap, candidate_fd: int, tmp_bytes: int, child_args: list[str], bootstrap: str) -> list[str]:
    """The full argv: bubblewrap's options, then the interpreter running the bootstrap on the candidate."""
    args = [bw.exe, "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in ENV.items():
        args += ["--setenv", key, value]
    if bw.as_root:
        # No user namespace: the rest is the host's root until sandbox_child drops to nobody, which needs these two.
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        if bw.disable_userns:
            args += ["--disable-userns"]
    args += ["--hostname", "sandbox", *_readonly_view(), "--proc", "/proc", "--dev", "/dev"]
    if bw.sized_tmpfs:
        args += ["--size", str(tmp_bytes)]
    args += ["--perms", "1777", "--tmpfs", WORK_DIR, "--perms", "0755", "--dir", SANDBOX_DIR,
             "--perms", "0444", "--ro-bind-data", str(candidate_fd), CANDIDATE, "--chdir", WORK_DIR]
    return [*args, "--", str(interpreter()), "-I", "-S", "-c", bootstrap, CANDIDATE, *child_args]
