"""Progress in a log: plain lines at intervals instead of a redrawing bar, with rate, ETA and the end."""
import io
import sys

from scratchlm import progress
from scratchlm.progress import Lines, duration


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_lines_print_at_intervals_with_rate_and_eta(capsys):
    clock = Clock()
    lines = Lines(total=100, desc="tokenize train", unit="doc", every=30, clock=clock)
    for _ in range(10):  # 10 docs in 10 s: under the interval, nothing yet
        clock.now += 1
        lines.update(1)
    assert capsys.readouterr().err == ""
    for _ in range(20):  # 30 docs at 30 s: one line
        clock.now += 1
        lines.update(1)
    err = capsys.readouterr().err.splitlines()
    assert err == ["tokenize train: 30/100 doc (30%), 1.0 doc/s, ETA 1.2 min"]
    clock.now += 5
    lines.close()
    lines.close()  # closing twice says it once
    assert capsys.readouterr().err.splitlines() == ["tokenize train: 30/100 doc (30%), 0.9 doc/s, done in 35.0 s"]


def test_a_short_stage_prints_nothing_and_iteration_passes_every_item(capsys):
    clock = Clock()
    assert list(Lines(range(5), desc="quick", every=30, clock=clock)) == [0, 1, 2, 3, 4]
    assert capsys.readouterr().err == ""


def test_bar_is_plain_lines_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.delenv("SCRATCHLM_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log file, a pipe: not a terminal
    assert isinstance(progress.bar(range(3), desc="x"), Lines)
    assert not isinstance(progress.bar(range(3), desc="x", lines=False), Lines)  # the caller logs its own
    monkeypatch.setenv("SCRATCHLM_PROGRESS", "1")
    assert not isinstance(progress.bar(range(3), desc="x"), Lines)


def test_duration():
    assert [duration(s) for s in (12.34, 90, 3 * 3600)] == ["12.3 s", "1.5 min", "3.0 h"]
