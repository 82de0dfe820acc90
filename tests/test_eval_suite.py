"""Evaluation pieces: diversity, pass@k, the sandbox (a malicious candidate cannot write outside its temp dir),
JSONL tasks, and the human rating sheet (scored through stdin, out-of-range scores refused)."""
import json
import subprocess
import sys
import textwrap

import pytest

from scratchlm.errors import UserError
from scratchlm.eval.diversity import distinct_n, repeated_ngram_rate
from scratchlm.eval.human import load_sheet, rate_sheet, save_sheet, summarize_sheet
from scratchlm.eval.humaneval import check_program, load_problems, pass_at_k
from scratchlm.eval.sandbox import run_program
from scratchlm.eval.tasks import read_task, score_completion, score_multiple_choice
from scratchlm.model.checkpoint import load_model
from ship_fixtures import make_checkpoint


def test_diversity_metrics():
    assert distinct_n(["a b c", "a b d"], 1) == 4 / 6
    assert repeated_ngram_rate(["x y x y x y"], 2) == 3 / 5  # (x y) x3, (y x) x2: 3 repeats of 5
    assert repeated_ngram_rate(["one two three four five"], 4) == 0.0
    assert distinct_n([""], 2) is None


def test_pass_at_k_estimator():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 10) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 1, 10) == 1.0 and pass_at_k(10, 1, 5) == pytest.approx(0.5)


def test_humaneval_problems_ship_offline_and_a_correct_solution_passes():
    problems = load_problems()
    assert len(problems) == 164
    p = problems[0]  # has_close_elements
    solution = ("    return any(abs(a - b) < threshold for i, a in enumerate(numbers)"
                " for b in numbers[i + 1:])\n")
    assert run_program(check_program(p, solution)).passed
    assert not run_program(check_program(p, "    return True\n")).passed


def test_sandbox_contains_a_malicious_candidate(tmp_path):
    target = tmp_path / "owned.txt"
    attacks = [f"open({str(target)!r}, 'w').write('x')",
               f"import pathlib; pathlib.Path({str(target)!r}).write_text('x')",
               f"import os; os.system('touch {target}')",
               f"import subprocess; subprocess.run(['touch', {str(target)!r}])",
               f"import os; fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT); os.write(fd, b'x')",
               f"import shutil; shutil.copyfile(__file__, {str(target)!r})",
               "import ctypes",
               "import socket; socket.create_connection(('127.0.0.1', 9))"]
    for attack in attacks:
        result = run_program(attack, timeout_s=10)
        assert not result.passed, attack
        assert "PermissionError" in result.output or "sandbox" in result.output, (attack, result.output)
    assert not target.exists()
    # Inside its own directory a candidate may write, and the directory is gone afterwards.
    assert run_program("open('scratch.txt', 'w').write('ok'); print(open('scratch.txt').read())").passed
    assert run_program("while True: pass", timeout_s=1).status == "timeout"
    assert not run_program("x = bytearray(1 << 31)", memory_mb=256).passed


@pytest.fixture(scope="module")
def model_and_tok(tmp_path_factory):
    model, tok, _ = load_model(make_checkpoint(tmp_path_factory.mktemp("ck")))
    return model, tok


def test_tasks_score_and_reject_bad_lines(tmp_path, model_and_tok):
    model, tok = model_and_tok
    mc = tmp_path / "mc.jsonl"
    mc.write_text("\n".join(json.dumps(x) for x in [
        {"prompt": "def add(a, b):\n    return", "choices": [" a + b", " zz qq"], "answer": 0},
        {"prompt": "The quick brown", "choices": [" fox", " dog"], "answer": " fox"}]) + "\n")
    r = score_multiple_choice(model, tok, read_task(mc, "multiple_choice"))
    assert r["items"] == 2 and 0 <= r["accuracy"] <= 1 and r["chance"] == 0.5
    comp = tmp_path / "c.jsonl"
    comp.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    assert score_completion(model, tok, read_task(comp, "completion"))["items"] == 1
    mc.write_text(json.dumps({"prompt": "x", "choices": ["a", "b"], "answer": 5}) + "\n")
    with pytest.raises(UserError, match="line 1.*answer"):
        read_task(mc, "multiple_choice")


def _sheet(path, scores=(None, None)):
    sheet = {"checkpoint": "/x/step_1", "checkpoint_id": "abc", "step": 1, "created": "2025-01-01T00:00:00",
             "rated": None, "scale": [1, 5],
             "criteria": [{"name": "fluent", "description": "reads naturally"},
                          {"name": "correct", "description": "right"}],
             "items": [{"id": i + 1, "prompt": f"p{i}", "output": f"o{i}", "note": "",
                        "scores": {"fluent": scores[0], "correct": scores[1]}} for i in range(2)]}
    save_sheet(sheet, path)
    return path


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_rating_through_stdin(tmp_path, suffix):
    path = _sheet(tmp_path / f"human-1{suffix}")
    # "9" is out of range and asked again; everything is read from a pipe, as a person would type it.
    script = textwrap.dedent(f"""
        from scratchlm.eval.human import rate_sheet
        rate_sheet({str(path)!r})
    """)
    r = subprocess.run([sys.executable, "-c", script], input="4\n9\n5\n3\n2\n", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "1..5" in r.stdout
    summary = summarize_sheet(load_sheet(path))
    assert summary["criteria"] == {"fluent": {"mean": 3.5, "rated": 2}, "correct": {"mean": 3.5, "rated": 2}}
    assert summary["rated"]


def test_quitting_keeps_progress_and_out_of_range_scores_are_refused(tmp_path):
    path = _sheet(tmp_path / "human-2.json")
    answers = iter(["4", "q"])
    rate_sheet(path, ask=lambda _: next(answers), say=lambda _: None)
    assert load_sheet(path)["items"][0]["scores"] == {"fluent": 4, "correct": None}
    bad = _sheet(tmp_path / "human-3.csv", scores=(3, 7))
    with pytest.raises(UserError, match="item 1 criterion `correct`: score 7 is outside 1..5"):
        load_sheet(bad)
