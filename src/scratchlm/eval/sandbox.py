"""Run an untrusted program (a model-written HumanEval candidate) behind an operating-system boundary.

Every candidate runs in a bubblewrap sandbox (bubblewrap.py: namespaces and the files it sees) as an
unprivileged uid with resource limits (sandbox_child.py), and this module supervises it: the deadline is kept
on the whole PID namespace (killing bubblewrap kills every process in it, detached or not), and the output is
read with a byte cap, never waited on past the deadline. An audit hook cannot be a boundary (CPython's docs
say so); where no sandbox can be made, model-written code is refused with one line that says why, unless the
user asks for it to run unsandboxed by a flag whose name says it is unsafe. docs/eval.md: the threat model.
"""
from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import UserError
from . import bubblewrap
from .bubblewrap import NOBODY, Bubblewrap

BOOTSTRAP = Path(__file__).with_name("sandbox_child.py").read_text(encoding="utf-8")
UNSAFE_FLAG = "--unsafe-run-code-unsandboxed"
UNSAFE_KEY = "eval.suite.unsafe_run_code_unsandboxed"
OUTPUT_KEEP = 64 * 1024  # bytes of output kept (the last ones: a traceback ends there); the rest is read and dropped
OUTPUT_TAIL = 2000  # characters of it stored with each result, for a person to read
KILL_GRACE_S = 0.5  # after the kill, how long the last output may take to arrive
ENABLE_HINT = ("unprivileged user namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1; Ubuntu "
               "24.04: kernel.apparmor_restrict_unprivileged_userns=0) and, in a container, by its runtime "
               "(Docker: --security-opt seccomp=unconfined --security-opt apparmor=unconfined)")


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0  # wall clock, for the whole sandbox
    memory_mb: int = 512  # address space of each process
    file_mb: int = 16  # the largest file a candidate may write
    tmp_mb: int = 64  # its private /tmp in all: tmpfs is RAM, and not in any process's address space
    processes: int = 16  # so memory in all is at most processes x memory_mb
    open_files: int = 64

    @property
    def cpu_s(self) -> int:
        return int(self.timeout_s) + 1

    def child_args(self, mode: str) -> list[str]:
        return [str(v) for v in (self.memory_mb << 20, self.cpu_s, self.file_mb << 20, self.open_files,
                                 self.processes)] + [mode]

    def describe(self) -> str:
        return (f"{self.timeout_s:g} s wall clock, {self.cpu_s} s CPU, {self.memory_mb} MB address space and "
                f"{self.file_mb} MB per file, {self.processes} processes, {self.open_files} open files")


@dataclass(frozen=True)
class Isolation:
    kind: str  # "bubblewrap" | "unsandboxed"
    summary: str  # one line for the eval report and `scratchlm check`
    bubblewrap: Bubblewrap | None = None


@dataclass
class SandboxResult:
    status: str  # passed | failed | timeout
    returncode: int | None
    output: str  # the tail of stdout+stderr, for a person to read

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _summary(bw: Bubblewrap, limits: Limits = Limits()) -> str:
    who = (f"invoked as root: no user namespace, the host's uid {NOBODY} with no capabilities" if bw.as_root
           else f"a user namespace, uid {NOBODY} inside, no capabilities")
    tmp = f"a private {limits.tmp_mb} MiB /tmp" if bw.sized_tmpfs else \
        f"a private /tmp (its size not capped: bubblewrap {bw.version} < 0.7; {limits.file_mb} MB per file)"
    return (f"bubblewrap {bw.version}: PID, mount, network, IPC and UTS namespaces; {who}; read-only /usr and "
            f"interpreter, {tmp} as the only writable place; no network")


def _probe_source() -> str:
    """A program that prints "sandbox ok" only where the view is as built: uid nobody, and none of the host's
    secrets, home directory entries or working directory visible."""
    bound = [Path("/usr"), *bubblewrap.interpreter_paths()]  # the host's own files, read-only
    own = [Path(p) for p in bubblewrap.OWN_PATHS]  # the sandbox's own folders, under the host's names

    def visible_by_design(p: Path) -> bool:
        return p in own or any(s.is_relative_to(p) or p.is_relative_to(s) for s in bound)

    home = Path.home()
    host = [Path("/etc/passwd"), Path("/etc/shadow"), Path("/home"), Path.cwd(),
            *(sorted(home.iterdir())[:50] if home.is_dir() and os.access(home, os.R_OK) else [])]
    hidden = [str(p) for p in host if p.exists() and not visible_by_design(p)]
    return (f"import os\nseen = [p for p in {hidden!r} if os.path.exists(p)]\n"
            f"print('sandbox ok' if not seen and os.getuid() == {NOBODY} else "
            f"f'sandbox view wrong: uid {{os.getuid()}}, sees {{seen}}')\n")


@lru_cache(maxsize=1)
def detect() -> Isolation | str:
    """The sandbox this machine can give, checked by running a probe in it; else why not (one line)."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces (bubblewrap); this is {sys.platform}"
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap is not installed (apt-get install bubblewrap; dnf install bubblewrap)"
    bw = bubblewrap.features(exe)
    result = _run_sandboxed(_probe_source(), Limits(timeout_s=30), bw)
    last = (result.output.strip().splitlines() or [f"exit status {result.returncode}, no output"])[-1]
    if result.passed and last == "sandbox ok":
        return Isolation("bubblewrap", _summary(bw), bw)
    if result.passed:  # it ran, but not in the view it was built to have: a bug, not a setting
        return f"bubblewrap {bw.version} made a sandbox that does not hold here ({last.strip()[:200]})"
    return f"bubblewrap {bw.version} could not make the sandbox here ({last.strip()[:200]}): {ENABLE_HINT}"


def unsandboxed() -> Isolation:
    user = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    return Isolation("unsandboxed", f"NONE: model-written code ran as {user}, outside any sandbox, with only an "
                                    f"audit hook and resource limits ({UNSAFE_FLAG})")


def choose_isolation(allow_unsandboxed: bool) -> tuple[Isolation | None, str]:
    """The isolation model-written code would run in (None: refused) and why no sandbox ("" where there is one).
    The one place that decides: require_isolation acts on it, `scratchlm check` reports it."""
    found = detect()
    if isinstance(found, Isolation):
        return found, ""
    return (unsandboxed() if allow_unsandboxed else None), found


def require_isolation(allow_unsandboxed: bool = False) -> Isolation:
    """The sandbox, or a one-line refusal; unsandboxed only when the user asked for it by the unsafe flag."""
    isolation, why = choose_isolation(allow_unsandboxed)
    if isolation is None:
        raise UserError(f"refusing to run model-written code (HumanEval) without a sandbox: {why}; or set "
                        f"eval.suite.humaneval = \"off\", or accept the risk with {UNSAFE_FLAG} ({UNSAFE_KEY} = true)")
    return isolation


def run_program(source: str, timeout_s: float = 5.0, memory_mb: int = 512,
                isolation: Isolation | None = None) -> SandboxResult:
    """Run `source` as a Python program; passed means it exited with status 0 within the limits."""
    iso = isolation or require_isolation()
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    if iso.kind == "bubblewrap":
        return _run_sandboxed(source, limits, iso.bubblewrap)
    return _run_unsandboxed(source, limits)


def _run_sandboxed(source: str, limits: Limits, bw: Bubblewrap) -> SandboxResult:
    fd = os.memfd_create("candidate")  # bubblewrap copies it into the sandbox: no host path is shared
    try:
        with os.fdopen(os.dup(fd), "wb") as f:
            f.write(source.encode("utf-8", "surrogatepass"))
        os.lseek(fd, 0, os.SEEK_SET)
        cmd = bubblewrap.command(bw, fd, limits.tmp_mb << 20, limits.child_args("sandbox"), BOOTSTRAP)
        return _supervise(cmd, limits.timeout_s, pass_fds=(fd,), cwd="/", env={"PATH": "/usr/bin:/bin"})
    finally:
        os.close(fd)


def _run_unsandboxed(source: str, limits: Limits) -> SandboxResult:
    tmp = tempfile.mkdtemp(prefix="scratchlm-unsandboxed-")
    try:
        program = os.path.join(tmp, "candidate.py")
        with open(program, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(source)
        env = {**bubblewrap.ENV, "HOME": tmp, "TMPDIR": tmp}
        cmd = [str(bubblewrap.interpreter()), "-I", "-S", "-c", BOOTSTRAP, program, *limits.child_args("unsandboxed")]
        return _supervise(cmd, limits.timeout_s, cwd=tmp, env=env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _Tail:
    """The last OUTPUT_KEEP bytes of a stream of any length."""

    def __init__(self) -> None:
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * OUTPUT_KEEP:
            del self.data[:-OUTPUT_KEEP]

    def text(self) -> str:
        return self.data[-OUTPUT_KEEP:].decode("utf-8", "replace")[-OUTPUT_TAIL:]


def _read_until(fd: int, deadline: float, tail: _Tail) -> bool:
    """Read fd into tail until every writer has closed it (True) or the deadline passes (False)."""
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return True
            tail.add(chunk)
    return False


def _supervise(cmd: list[str], timeout_s: float, **popen) -> SandboxResult:
    """Run cmd with output read as it comes; at the deadline kill its process group (bubblewrap: the whole PID
    namespace goes with it). A process that keeps the output open does not stretch the deadline."""
    deadline = time.monotonic() + timeout_s
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, **popen)
    tail, fd = _Tail(), proc.stdout.fileno()
    try:
        _read_until(fd, deadline, tail)
        try:
            rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            _kill_group(proc.pid)
            proc.wait()
            _read_until(fd, time.monotonic() + KILL_GRACE_S, tail)
            return SandboxResult("timeout", None, tail.text())
        return SandboxResult("passed" if rc == 0 else "failed", rc, tail.text())
    finally:
        _kill_group(proc.pid)  # what an unsandboxed candidate left in its group; nothing under bubblewrap
        proc.stdout.close()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
