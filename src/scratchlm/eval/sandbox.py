"""Run an untrusted program (a model-written HumanEval candidate) in a subprocess with limits.

Layers, each best effort on its own:
- a fresh temporary directory as cwd, HOME and TMPDIR, and an environment holding only PATH and those;
- resource limits: address space (memory), CPU seconds, file size, no core dumps; a wall-clock timeout
  that kills the whole process group;
- no network: `unshare -rn` (an empty network namespace) when the kernel allows unprivileged user
  namespaces, and in any case an audit hook that refuses sockets;
- the same audit hook refuses to open files for writing, or to remove/rename/create paths, outside the temp
  directory, and refuses to start processes or load ctypes (the usual ways around a Python-level hook).
An audit hook is not a security boundary against a determined attacker (CPython documents this); for
untrusted code at scale run this inside a container. It is enough for code a small model writes by accident.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache

GUARD = r'''
import os, sys
ROOT = os.path.realpath(os.getcwd())
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink",
               "os.link", "os.truncate", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile"}
DENIED = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "os.system", "os.exec",
          "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn",
          "ctypes.dlopen", "ctypes.dlsym", "os.kill", "os.killpg", "signal.pthread_kill", "sys.addaudithook"}

def inside(path):
    if isinstance(path, int):
        return True  # an already-open descriptor
    p = os.path.realpath(os.fsdecode(path))
    return p == ROOT or p.startswith(ROOT + os.sep)

def hook(event, args):
    if event in DENIED:
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "import" and args[0] in ("ctypes", "_ctypes"):
        raise PermissionError("sandbox: ctypes is not allowed")
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
        if writing and path is not None and not inside(path):
            raise PermissionError(f"sandbox: writing {path} outside the sandbox directory")
    elif event in PATH_EVENTS:
        for a in args[:2]:
            if isinstance(a, (str, bytes, os.PathLike)) and not inside(a):
                raise PermissionError(f"sandbox: {event} on {a} outside the sandbox directory")

sys.addaudithook(hook)
_path = sys.argv[1]
sys.argv = sys.argv[1:]
with open(_path, encoding="utf-8") as _f:
    _source = _f.read()
exec(compile(_source, _path, "exec"), {"__name__": "__main__", "__file__": _path})
'''


@dataclass
class SandboxResult:
    status: str  # passed | failed | timeout
    returncode: int | None
    output: str  # the tail of stdout+stderr, for a person to read

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@lru_cache(maxsize=1)
def network_namespace_prefix() -> tuple[str, ...]:
    """`unshare -rn` when it works here (it needs unprivileged user namespaces), else nothing."""
    exe = shutil.which("unshare")
    if not exe:
        return ()
    try:
        ok = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return (exe, "-rn") if ok else ()


def _limits(memory_mb: int, cpu_s: int):
    def apply() -> None:
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_program(source: str, timeout_s: float = 5.0, memory_mb: int = 512) -> SandboxResult:
    """Run `source` as a Python program; passed means it exited with status 0 within the limits."""
    tmp = tempfile.mkdtemp(prefix="scratchlm-sandbox-")
    try:
        program = os.path.join(tmp, "candidate.py")
        with open(program, "w", encoding="utf-8") as f:
            f.write(source)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
        cmd = [*network_namespace_prefix(), sys.executable, "-I", "-c", GUARD, program]
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, preexec_fn=_limits(memory_mb, int(timeout_s) + 1),
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: a candidate cannot leave children behind
            out, _ = proc.communicate()
            return SandboxResult("timeout", None, out.decode("utf-8", "replace")[-2000:])
        status = "passed" if proc.returncode == 0 else "failed"
        return SandboxResult(status, proc.returncode, out.decode("utf-8", "replace")[-2000:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
