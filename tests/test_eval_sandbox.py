"""Hostile HumanEval candidates, one per way out, each run through the path HumanEval uses (check_program ->
run_program with the detected isolation) and each contained: nothing written outside the sandbox, nothing read
from outside its view, no process alive after the deadline, the evaluator alive, the deadline kept.

Where this machine cannot make the sandbox these tests are skipped and the refusal is tested instead, unless
SCRATCHLM_REQUIRE_SANDBOX=1 (CI sets it): then a missing sandbox fails them.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from scratchlm.errors import UserError
from scratchlm.eval import bubblewrap, sandbox
from scratchlm.eval.humaneval import check_program, load_problems
from scratchlm.eval.sandbox import Isolation, SandboxResult, require_isolation, run_program

FOUND = sandbox.detect()
needs_sandbox = pytest.mark.skipif(
    not isinstance(FOUND, Isolation) and os.environ.get("SCRATCHLM_REQUIRE_SANDBOX") != "1",
    reason=f"no sandbox on this machine: {FOUND}")
# A problem whose test calls the candidate function: the attack runs as the body of a completion.
PROBLEM = {"prompt": "def solve():\n", "test": "def check(f):\n    f()\n", "entry_point": "solve"}


def attack(body: str, timeout_s: float = 5.0, memory_mb: int = 512) -> SandboxResult:
    completion = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"
    return run_program(check_program(PROBLEM, completion), timeout_s, memory_mb, require_isolation())


def processes_with(token: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if token.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def gone(token: str, within_s: float = 2.0) -> bool:
    """No process carrying token, allowing the kernel its moment to tear a killed namespace down."""
    end = time.monotonic() + within_s
    while processes_with(token):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def outside():
    """A host folder the candidate knows the path of (short: it also holds a Unix socket)."""
    d = Path(tempfile.mkdtemp(prefix="sbx"))
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


@pytest.fixture
def token():
    return f"scratchlm-sbx-{uuid.uuid4().hex[:12]}"


@needs_sandbox
def test_writes_through_dir_fd_rename_and_absolute_paths_stay_inside(outside, token):
    result = attack(f"""
        import os
        tried = []
        for how in ("dir_fd", "rename", "absolute", "host_tmp"):
            try:
                if how == "dir_fd":
                    d = os.open({str(outside)!r}, os.O_RDONLY)
                    os.write(os.open("owned", os.O_WRONLY | os.O_CREAT, dir_fd=d), b"x")
                elif how == "rename":
                    open("mine", "w").write("x")
                    os.rename("mine", "owned2", dst_dir_fd=os.open({str(outside)!r}, os.O_RDONLY))
                elif how == "absolute":
                    open({str(outside / "owned3")!r}, "w").write("x")
                else:
                    open("/tmp/{token}", "w").write("x")  # the sandbox's own /tmp: allowed, never the host's
                tried.append(how + " ok")
            except OSError as e:
                tried.append(how + " " + type(e).__name__)
        print(tried)
    """)
    assert result.passed, result.output
    assert "host_tmp ok" in result.output and "dir_fd ok" not in result.output, result.output
    assert list(outside.iterdir()) == [] and not Path(f"/tmp/{token}").exists()


@needs_sandbox
def test_tampering_with_the_bootstrap_changes_nothing(outside):
    result = attack(f"""
        import sys
        main = sys.modules["__main__"]
        for name in list(vars(main)):
            if not name.startswith("__"):
                setattr(main, name, lambda *a, **k: None)
        sys.addaudithook(lambda *a: None)
        open({str(outside / "owned")!r}, "w").write("x")
    """)
    assert not result.passed and ("FileNotFoundError" in result.output or "PermissionError" in result.output)
    assert list(outside.iterdir()) == []


@needs_sandbox
def test_secrets_and_the_home_directory_cannot_be_read(outside, token):
    home = Path.home()
    on_the_way = sorted({q.name for p in bubblewrap.interpreter_paths() for q in (p, *p.parents)} - {""}
                        | {"ld.so.cache"})  # the loader's cache: /etc holds nothing else
    secret = home / f".{token}"
    try:
        secret.write_text(f"secret-{token}")
    except OSError:
        pytest.skip(f"cannot plant a file in {home}")
    try:
        result = attack(f"""
            import os, shutil
            leaks = []
            for path in ("/etc/passwd", "/etc/shadow", {str(secret)!r}, {str(home / ".bashrc")!r}):
                try:
                    leaks.append(open(path).read()[:60])
                    shutil.copy(path, {str(outside)!r})
                except OSError:
                    pass
            for d in ({str(home)!r}, "/home", "/etc", "/run", "/var"):
                try:  # the folders on the way to the interpreter are there by design, nothing beside them
                    seen = [e for e in os.listdir(d) if e not in {on_the_way!r}]
                    leaks += [f"{{d}}: {{seen[:5]}}"] if seen else []
                except OSError:
                    pass
            print("LEAKS", leaks)
        """)
    finally:
        secret.unlink()
    assert result.passed and "LEAKS []" in result.output, result.output
    assert list(outside.iterdir()) == []


# Starts a process the way subprocess does, through _posixsubprocess.fork_exec, which raises no audit event
# (CPython 3.11's signature; elsewhere subprocess.Popen, which reaches the same call).
SPAWN = """
import os, subprocess, _posixsubprocess
def spawn(argv):
    r, w = os.pipe()
    try:
        return _posixsubprocess.fork_exec([os.fsencode(a) for a in argv], [os.fsencode(argv[0])], True, (w,),
                                          None, None, -1, -1, -1, -1, -1, -1, r, w, True, True, -1, None, None,
                                          None, -1, None, False)
    except TypeError:
        return subprocess.Popen(argv, start_new_session=True).pid
    finally:
        os.close(r)
        os.close(w)
"""


@needs_sandbox
def test_unhooked_processes_cannot_write_outside_or_outlive_the_run(outside, token):
    result = attack(SPAWN + f"""
started = 0
for i in range(200):
    try:  # the shell's $0 is the token: findable in /proc while it lives
        spawn(["/bin/sh", "-c", "echo x > {outside}/owned$$; sleep 60", {token!r}])
        started += 1
    except OSError:
        pass
print("started", started)
""", timeout_s=3)
    assert gone(token), processes_with(token)
    assert list(outside.iterdir()) == []
    assert "started" in result.output and int(result.output.split("started")[-1].split()[0]) < 200, result.output


@needs_sandbox
def test_a_fork_bomb_is_capped_and_nothing_survives(token):
    result = attack(SPAWN + f"""
forks = 0
for i in range(200):
    try:
        spawn(["/bin/sh", "-c", "sleep 60", {token!r}])
        forks += 1
    except OSError:
        break
print("forks", forks)
""", timeout_s=3)
    assert "forks" in result.output and int(result.output.split("forks")[-1].split()[0]) < 200, result.output
    assert gone(token), processes_with(token)


@needs_sandbox
def test_killing_its_parent_or_everything_leaves_the_evaluator_alive(tmp_path):
    """The evaluator is a process of its own here, so that a candidate that reached it would show as its death."""
    body = """
        import os, signal
        for kill in (lambda: signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL),
                     lambda: os.kill(1, signal.SIGKILL), lambda: os.kill(-1, signal.SIGKILL)):
            try:
                kill()
            except OSError as e:
                print(type(e).__name__)
    """
    script = tmp_path / "evaluator.py"
    script.write_text("import sys\nsys.path[:0] = [%r]\nfrom test_eval_sandbox import attack\n"
                      "r = attack(%r)\nprint('evaluator alive', r.status)\n" % (str(Path(__file__).parent), body))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "evaluator alive" in out.stdout, (out.returncode, out.stdout, out.stderr)


@needs_sandbox
def test_detached_and_double_forked_survivors_die_with_the_sandbox(token):
    start = time.monotonic()
    result = attack(f"""
        import os
        if os.fork() == 0:  # double fork + setsid: the classic daemon, its stdout closed
            os.setsid()
            if os.fork() == 0:
                fd = os.open("/dev/null", os.O_WRONLY)
                os.dup2(fd, 1); os.dup2(fd, 2)
                os.execv("/bin/sleep", [{token!r} + "-daemon", "120"])
            os._exit(0)
        if os.fork() == 0:  # a detached child that keeps the candidate's stdout open
            os.setsid()
            os.execv("/bin/sleep", [{token!r} + "-holder", "120"])
        print("parent done")
    """, timeout_s=5)
    elapsed = time.monotonic() - start
    assert result.passed and "parent done" in result.output, result.output
    assert elapsed < 60, elapsed  # not the children's 120 s: the held pipe did not stretch the run
    assert gone(token), processes_with(token)


@needs_sandbox
def test_the_deadline_holds_against_loops_with_signals_ignored(token):
    start = time.monotonic()
    result = attack(f"""
        import os, signal
        for s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        if os.fork() == 0:
            os.execv("/bin/sleep", [{token!r}, "120"])
        while True:
            pass
    """, timeout_s=2)
    assert result.status == "timeout" and time.monotonic() - start < 30
    assert gone(token), processes_with(token)


def _listen(family, address) -> tuple[socket.socket, list]:
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(8)
    server.settimeout(0.2)
    accepted: list = []

    def accept_until_closed():
        while True:
            try:
                accepted.append(server.accept()[0])
            except socket.timeout:
                continue
            except OSError:
                return
    threading.Thread(target=accept_until_closed, daemon=True).start()
    return server, accepted


@needs_sandbox
def test_no_network_no_unix_sockets_of_the_host(outside, token):
    path_server, by_path = _listen(socket.AF_UNIX, str(outside / "s"))
    abstract_server, by_abstract = _listen(socket.AF_UNIX, f"\0{token}")
    tcp_server, by_tcp = _listen(socket.AF_INET, ("127.0.0.1", 0))
    port = tcp_server.getsockname()[1]
    try:
        result = attack(f"""
            import socket
            for family, address in ((socket.AF_UNIX, {str(outside / "s")!r}), (socket.AF_UNIX, "\\0{token}"),
                                    (socket.AF_INET, ("127.0.0.1", {port}))):
                s = socket.socket(family, socket.SOCK_STREAM)
                s.settimeout(2)
                try:
                    s.connect(address)
                    print("connected", address)
                except OSError as e:
                    print("refused", type(e).__name__)
        """)
        time.sleep(0.3)  # let an accept that happened be seen
    finally:
        for s in (path_server, abstract_server, tcp_server):
            s.close()
    assert result.passed and "connected" not in result.output, result.output
    assert by_path == by_abstract == by_tcp == []


@needs_sandbox
def test_memory_and_disk_are_capped():
    assert not attack("bytearray(30 << 30)").passed
    full = attack("""
        written = 0
        try:
            for i in range(100):
                with open(f"fill{i}", "wb") as f:
                    f.write(b"x" * (8 << 20))
                written += 8
        except OSError as e:
            print("stopped", type(e).__name__)
        print("MB", written)
        try:
            open("/usr/owned", "w")
        except OSError:
            print("usr read-only")
    """)
    assert "stopped" in full.output and "usr read-only" in full.output, full.output
    assert int(full.output.split("MB")[-1].split()[0]) <= sandbox.Limits().tmp_mb, full.output


@needs_sandbox
def test_canonical_humaneval_solutions_pass_in_the_sandbox():
    """Every bundled problem's canonical solution passes, as it does unsandboxed: the view hides nothing the
    standard library needs."""
    iso = require_isolation()
    failed = [p["task_id"] for p in load_problems()
              if not run_program(check_program(p, p["canonical_solution"]), 10, 512, iso).passed]
    assert failed == []
    assert not run_program(check_program(load_problems()[0], "    return True\n"), 10, 512, iso).passed


def test_without_a_sandbox_model_code_is_refused_in_one_line(monkeypatch):
    sandbox.detect.cache_clear()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    try:
        with pytest.raises(UserError) as e:
            require_isolation()
        message = str(e.value)
        assert "\n" not in message and "bubblewrap is not installed" in message and sandbox.UNSAFE_FLAG in message
        iso = require_isolation(allow_unsandboxed=True)  # the user's explicit, unsafe choice
        assert iso.kind == "unsandboxed" and "NONE" in iso.summary
        assert run_program("print(6 * 7)", isolation=iso).output.strip() == "42"
        assert run_program("import socket; socket.socket()", isolation=iso).status == "failed"  # the hook layer
    finally:
        sandbox.detect.cache_clear()


def test_a_sandbox_the_kernel_refuses_is_named_with_the_fix(monkeypatch, tmp_path):
    """A bubblewrap that cannot make namespaces (a locked-down container) gives its own error and the fix."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }\n"
                    "echo 'bwrap: No permissions to create a new namespace' >&2; exit 1\n")
    fake.chmod(0o755)
    sandbox.detect.cache_clear()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(fake))
    try:
        reason = sandbox.detect()
        assert isinstance(reason, str) and "No permissions to create a new namespace" in reason
        assert "unprivileged_userns_clone" in reason
    finally:
        sandbox.detect.cache_clear()


def _config(domain: str, unsafe: bool = False):
    from scratchlm.config import config_from_dict

    return config_from_dict({"data": {"sources": [{"name": "a", "domain": domain, "path": "a.txt"}]},
                             "eval": {"suite": {"unsafe_run_code_unsandboxed": unsafe}}})


def test_check_states_which_isolation_would_run(monkeypatch):
    from scratchlm.plan.check import _sandbox_verdict

    assert _sandbox_verdict(_config("web")).summary.startswith("no model-written code is run")
    monkeypatch.setattr(sandbox, "detect", lambda: "bubblewrap is not installed (apt-get install bubblewrap)")
    refused = _sandbox_verdict(_config("code"))
    assert refused.level == "warning" and "will refuse to run: bubblewrap is not installed" in refused.summary
    unsafe = _sandbox_verdict(_config("code", unsafe=True))
    assert unsafe.level == "warning" and unsafe.summary.startswith("NONE: model-written code ran")
    monkeypatch.setattr(sandbox, "detect", lambda: FOUND)
    if isinstance(FOUND, Isolation):
        found = _sandbox_verdict(_config("code"))
        assert found.level == "ok" and found.summary == FOUND.summary


def test_the_suite_refuses_before_loading_the_model(monkeypatch, tmp_path):
    """No sandbox: `eval suite` on a code config (HumanEval under its cap) stops at once with the one-line refusal."""
    from scratchlm.eval.suite import HumanEvalChoice, evaluate_suite

    monkeypatch.setattr(sandbox, "detect", lambda: "bubblewrap is not installed (apt-get install bubblewrap)")
    with pytest.raises(UserError, match="refusing to run model-written code"):
        evaluate_suite(_config("code"), {}, tmp_path / "no-checkpoint-needed",
                       humaneval=HumanEvalChoice(cap_minutes=10))


@needs_sandbox
def test_the_probe_accepts_an_evaluator_started_in_tmp(monkeypatch, tmp_path):
    """/tmp exists inside the sandbox (its own): an evaluator started there is no leak; a folder under it is."""
    sandbox.detect.cache_clear()
    try:
        monkeypatch.chdir("/tmp")
        assert isinstance(sandbox.detect(), Isolation), sandbox.detect()
        monkeypatch.chdir(tmp_path)
        assert repr(str(tmp_path)) in sandbox._probe_source()  # checked: the host's folder must not be seen
        assert isinstance(sandbox.detect.__wrapped__(), Isolation)
    finally:
        sandbox.detect.cache_clear()
