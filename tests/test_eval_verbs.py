"""`scratchlm eval` and its verbs: each verb takes only its own flags, the forms before the verbs still run (with a
note), and HumanEval in the suite runs only when asked or when its estimate, printed first, fits the cap."""
import pytest

from scratchlm.cli import HUMANEVAL_CAP_MINUTES, _old_eval_forms, build_parser
from scratchlm.config import config_from_dict
from scratchlm.errors import UserError
from scratchlm.eval import humaneval
from scratchlm.eval.suite import HumanEvalChoice, humaneval_go_on

OWN = {"suite": ("--humaneval", "--humaneval-cap-minutes", "--unsafe-run-code-unsandboxed"),
       "human": ("--n", "--format", "--out"),
       "rate": (),
       "watch": ("--device", "--suite", "--every-checkpoint", "--every", "--threads", "--unsafe-run-code-unsandboxed")}


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("verb", OWN)
def test_each_verb_shows_only_its_own_flags(capsys, verb):
    text = _help(capsys, "eval", verb)
    others = {flag for v, flags in OWN.items() if v != verb for flag in flags} - set(OWN[verb])
    assert all(f"{flag} " in text or f"{flag}\n" in text for flag in OWN[verb])
    assert [flag for flag in others if f" {flag} " in text or f"[{flag}" in text] == []


def test_the_stage_takes_no_verb_flags(capsys):
    text = _help(capsys, "eval")
    assert "--force" in text and all(v in text for v in OWN)
    assert [f for f in ("--checkpoint", "--n ", "--device", "--every", "--threads", "--suite") if f in text] == []


def _parse(*argv):
    args = build_parser().parse_args(list(argv))
    _old_eval_forms(args)
    return args


@pytest.mark.parametrize("argv", [("eval", "suite", "X", "-c", "F"), ("eval", "-c", "F", "suite", "X")])
def test_suite_takes_its_checkpoint_and_the_config_before_or_after_the_verb(argv):
    args = _parse(*argv)
    assert (args.verb, args.checkpoint, args.config) == ("suite", "X", "F")
    assert (args.humaneval, args.humaneval_cap_minutes) == (False, HUMANEVAL_CAP_MINUTES)


def test_the_forms_before_the_verbs_still_run_with_a_note(capsys):
    args = _parse("eval", "-c", "F", "--checkpoint", "X", "--unsafe-run-code-unsandboxed")
    assert (args.verb, args.checkpoint, args.humaneval_cap_minutes) == ("suite", "X", HUMANEVAL_CAP_MINUTES)
    assert args.unsafe_run_code_unsandboxed
    note = capsys.readouterr().err.strip().splitlines()
    assert len(note) == 1 and "`scratchlm eval suite PATH`" in note[0]
    args = _parse("eval", "human", "-c", "F", "--checkpoint", "X", "--n", "2")
    assert (args.verb, args.checkpoint, args.n) == ("human", "X", 2)
    assert "`scratchlm eval human PATH`" in capsys.readouterr().err
    assert _parse("eval", "-c", "F").verb is None  # the stage
    assert (_parse("eval", "rate", "S", "-c", "F").sheet, _parse("eval", "rate", "S").sheet) == ("S", "S")
    with pytest.raises(UserError, match="takes the checkpoint once"):
        _parse("eval", "human", "Y", "--checkpoint", "X")


def test_a_verb_without_its_config_is_one_line(capsys):
    from scratchlm.cli import main

    assert main(["eval", "suite", "X"]) == 2
    assert capsys.readouterr().err.strip() == "error: scratchlm eval suite needs -c CONFIG"


# --- HumanEval in the suite ---------------------------------------------------------------------------------------

def _cfg(domain="code", humaneval="auto", samples=10):
    return config_from_dict({"data": {"sources": [{"name": "a", "domain": domain, "path": "a.txt"}]},
                             "eval": {"suite": {"humaneval": humaneval, "humaneval_samples": samples}}})


@pytest.mark.parametrize("domain, key, choice, mode", [
    ("code", "auto", HumanEvalChoice(), "skipped"),  # the eval watcher: only when the config says "on"
    ("code", "auto", HumanEvalChoice(cap_minutes=10), "capped"),  # `eval suite`
    ("code", "auto", HumanEvalChoice(asked=True), "run"),
    ("code", "on", HumanEvalChoice(), "run"),
    ("code", "off", HumanEvalChoice(cap_minutes=10), None),
    ("code", "off", HumanEvalChoice(asked=True), "run"),
    ("web", "auto", HumanEvalChoice(cap_minutes=10), None),
])
def test_when_humaneval_runs(domain, key, choice, mode):
    assert choice.mode(_cfg(domain, key)) == mode


class Clock:
    """Each read 30 s later: one problem (two reads around it) takes 30 s."""
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 30.0
        return self.t


@pytest.fixture
def fake_humaneval(monkeypatch):
    calls = []
    monkeypatch.setattr(humaneval, "load_problems", lambda: [
        {"task_id": f"t/{i}", "prompt": "def f():\n", "test": "", "entry_point": "f"} for i in range(4)])
    monkeypatch.setattr(humaneval, "complete_text", lambda *a, **k: calls.append(a[2]) or "    return 1\n")
    monkeypatch.setattr(humaneval, "run_program", lambda *a: type("Outcome", (), {"status": "passed"})())
    return calls


def _run(go_on):
    isolation = type("Isolation", (), {"kind": "test", "summary": "test"})()
    return humaneval.run_humaneval(None, None, problems=0, samples=2, max_new_tokens=4, temperature=0.8,
                                   timeout_s=1, memory_mb=64, seed=0, isolation=isolation, go_on=go_on,
                                   clock=Clock())


def test_humaneval_asks_with_the_first_problems_estimate_and_stops_when_told(fake_humaneval):
    asked = []
    assert _run(lambda seconds, n: asked.append((seconds, n)) or False) is None
    assert asked == [(30.0 * 4, 4)] and len(fake_humaneval) == 2  # only the first problem's two samples
    result = _run(lambda seconds, n: True)
    assert result["problems"] == 4 and result["pass@1"] == 1.0


def test_the_estimate_is_printed_and_a_skip_says_how_to_run_it(capsys, tmp_path):
    cfg = _cfg()
    go_on = humaneval_go_on(cfg, tmp_path / "step_1", HumanEvalChoice(cap_minutes=10))
    assert not go_on(2 * 3600, 164)
    line = capsys.readouterr().err.strip()
    assert line.startswith("eval: HumanEval skipped: about 2.0 h for 164 problems x 10 samples")
    assert "10-minute cap" in line and f"`scratchlm eval suite {tmp_path / 'step_1'} -c CONFIG --humaneval`" in line
    assert go_on(5 * 60, 164)
    assert capsys.readouterr().err.strip() == ("eval: HumanEval: about 5.0 min for 164 problems x 10 samples (the "
                                               "first problem's time x the problems)")
    asked = humaneval_go_on(cfg, tmp_path, HumanEvalChoice(asked=True, cap_minutes=10))
    assert asked(2 * 3600, 164)  # asked for: runs whatever the estimate, which is still printed
    assert "about 2.0 h" in capsys.readouterr().err


def test_the_sft_refusal_suggests_the_suite(tmp_path):
    from scratchlm.sft.base_check import check_base

    with pytest.raises(UserError, match=r"run `scratchlm eval suite .*step_9 -c CONFIG` first"):
        check_base(tmp_path / "step_9", None, force=False)
