"""One command at a time per workdir; an unusable workdir, a full disk or a denied path end in one line."""
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scratchlm.data import prepare
from scratchlm.cli import main
from scratchlm.workdir_lock import LOCK_FILE

SOURCE = '[[data.sources]]\nname = "a"\ndomain = "web"\npath = "a.txt"\n'
HOLD = """
import sys
from pathlib import Path
from scratchlm.workdir_lock import workdir_lock

with workdir_lock(Path(sys.argv[1]), "workdir", "scratchlm run -c holder.toml"):
    print("locked", flush=True)
    sys.stdin.read()  # held until the test closes stdin
"""


@pytest.fixture
def config(tmp_path) -> Path:
    (tmp_path / "a.txt").write_text("hello " * 100)
    (tmp_path / "c.toml").write_text(SOURCE)
    return tmp_path / "c.toml"


@pytest.fixture
def holder(tmp_path):
    """A process holding the lock on <tmp_path>/run until the test ends (or kills it)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "locked\n"
    yield p
    p.stdin.close()
    p.wait(timeout=60)


def _error_line(capsys) -> str:
    """The error, as one line: the stage's own progress lines (`data: running`) may come before it."""
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip() and ": running (id " not in line]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def scratchlm(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "scratchlm", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_second_command_names_the_holder(config, holder, capsys):
    assert main(["data", "prepare", "-c", str(config)]) == 2
    line = _error_line(capsys)
    assert f"is in use by PID {holder.pid} on {socket.gethostname()} since " in line
    assert "(`scratchlm run -c holder.toml`)" in line and "--wait" in line and "[run] workdir" in line


def test_every_writing_command_takes_the_lock(config, holder, capsys):
    for args in (["run"], ["train"], ["eval"], ["report"], ["check"], ["data", "decontaminate"],
                 ["tokenizer", "train"], ["tokenizer", "encode"], ["sft", "--data", "x.jsonl"]):
        assert main([*args, "-c", str(config)]) == 2, args
        assert f"in use by PID {holder.pid}" in _error_line(capsys), args


def test_reading_commands_do_not_wait_for_the_lock(config, holder, capsys):
    assert main(["data", "show", "-c", str(config), "a/a.txt:1"]) == 2
    assert "the data stage for this config" in _error_line(capsys)  # got past the lock to its own error


def test_wait_starts_when_the_holder_finishes(config, holder):
    waiter = scratchlm("train", "-c", str(config), "--wait")
    first = waiter.stderr.readline()
    assert first.startswith(f"waiting for PID {holder.pid} on ") and waiter.poll() is None, first
    holder.stdin.close()  # the holder finishes
    rest = waiter.communicate(timeout=120)[1]
    assert waiter.returncode == 2 and "the data stage for this config" in rest and "in use" not in rest, rest


def test_a_killed_holder_does_not_block(config, holder, capsys):
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    stale = json.loads((config.parent / "run" / LOCK_FILE).read_text())
    assert stale["pid"] == holder.pid  # its note is still there, its lock died with it
    assert main(["train", "-c", str(config)]) == 2
    assert "the data stage for this config" in _error_line(capsys)
    assert json.loads((config.parent / "run" / LOCK_FILE).read_text())["pid"] == os.getpid()


FORKING_HOLDER = """
import os, sys, time
from pathlib import Path
from scratchlm.workdir_lock import workdir_lock

with workdir_lock(Path(sys.argv[1]), "workdir", "scratchlm data decontaminate"):
    worker = os.fork()  # like a forked worker pool (ours spawn, but a user's plugin may fork)
    if worker == 0:
        time.sleep(300)
        os._exit(0)
    print(worker, flush=True)
    sys.stdin.read()
"""


def test_a_killed_holder_does_not_block_while_its_forked_worker_lives(config, capsys):
    holder = subprocess.Popen([sys.executable, "-c", FORKING_HOLDER, str(config.parent / "run")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = int(holder.stdout.readline())
    try:
        holder.kill()
        holder.wait(timeout=60)
        assert main(["train", "-c", str(config)]) == 2
        assert "the data stage for this config" in _error_line(capsys)
    finally:
        os.kill(worker, signal.SIGKILL)


def test_torchrun_ranks_above_zero_do_not_lock(config, holder, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    assert main(["train", "-c", str(config)]) == 2
    assert "the data stage for this config" in _error_line(capsys)


def test_commands_started_by_the_holder_work_under_its_lock(config):
    from scratchlm.workdir_lock import workdir_lock

    with workdir_lock(config.parent / "run", "workdir", "scratchlm check -c c.toml"):
        child = scratchlm("train", "-c", str(config))  # what `scratchlm check` does to verify resuming
        err = child.communicate(timeout=120)[1]
        outsider = scratchlm("train", "-c", str(config), env={k: v for k, v in os.environ.items()
                                                                if k != "SCRATCHLM_WORKDIR_LOCK"})
        outsider_err = outsider.communicate(timeout=120)[1]
    assert "the data stage for this config" in err and "in use" not in err, err
    assert f"in use by PID {os.getpid()}" in outsider_err, outsider_err


def test_without_fcntl_it_warns_once_and_runs(config, capsys, monkeypatch):
    import scratchlm.workdir_lock as lock

    monkeypatch.setattr(lock, "fcntl", None)
    lock._warn_no_locking.cache_clear()
    for _ in range(2):
        assert main(["train", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("no file locking on this platform") == 1 and err.count("the data stage for this config") == 2


def test_unwritable_workdir_is_one_line_at_the_start(tmp_path, config, capsys, monkeypatch):
    (tmp_path / "afile").write_text("a regular file")
    config.write_text(SOURCE + f'[run]\nworkdir = "{tmp_path / "afile" / "sub"}"\n')
    monkeypatch.setattr(prepare, "prepare_data", lambda *a, **k: pytest.fail("the command started"))
    assert main(["data", "prepare", "-c", str(config)]) == 2
    line = _error_line(capsys)
    assert f"{config}: [run] workdir {tmp_path / 'afile' / 'sub'} cannot be written: Not a directory" in line
    assert main(["quickstart", "--workdir", str(tmp_path / "afile" / "qs")]) == 2
    assert "quickstart --workdir" in _error_line(capsys)


def test_reading_command_on_unwritable_workdir_is_one_line(tmp_path, config, capsys):
    (tmp_path / "afile").write_text("a regular file")
    config.write_text(SOURCE + f'[run]\nworkdir = "{tmp_path / "afile" / "sub"}"\n')
    assert main(["data", "show", "-c", str(config), "a/a.txt:1"]) == 2  # no lock, but it caches digests there
    assert "[run] workdir" in _error_line(capsys)


def _raises(error):
    def stage(*args, **kwargs):
        raise error
    return stage


def test_disk_full_is_one_line_with_the_free_space(tmp_path, config, capsys, monkeypatch):
    path = tmp_path / "run" / "data" / "new" / "train.jsonl"  # not there: the free space of its nearest parent
    monkeypatch.setattr(prepare, "prepare_data", _raises(OSError(errno.ENOSPC, "No space left on device", str(path))))
    assert main(["data", "prepare", "-c", str(config)]) == 1
    line = _error_line(capsys)
    assert re.fullmatch(f"error: disk full while writing {re.escape(str(path))}: [\\d.,]+ [MG]iB free on that filesystem",
                        line)
    monkeypatch.setattr(prepare, "prepare_data", _raises(OSError(errno.ENOSPC, "No space left on device")))
    assert main(["data", "prepare", "-c", str(config)]) == 1
    assert _error_line(capsys) == "error: disk full (no space left on device)"


def test_permission_denied_is_one_line(tmp_path, config, capsys, monkeypatch):
    path = tmp_path / "run" / "train" / "x"
    monkeypatch.setattr(prepare, "prepare_data", _raises(PermissionError(errno.EACCES, "Permission denied", str(path))))
    assert main(["data", "prepare", "-c", str(config)]) == 1
    assert _error_line(capsys) == f"error: {path}: Permission denied"


def test_other_os_errors_stay_tracebacks(config, monkeypatch):
    monkeypatch.setattr(prepare, "prepare_data", _raises(FileNotFoundError(errno.ENOENT, "gone", "/x")))
    with pytest.raises(FileNotFoundError):  # a missing file the code expected is a bug to see, not to hide
        main(["data", "prepare", "-c", str(config)])


def test_wait_is_offered_only_where_there_is_a_lock(config):
    with pytest.raises(SystemExit):
        main(["plan", "-c", str(config), "--wait"])
