"""Evaluation pieces: diversity, pass@k, the HumanEval problems (their sandbox: test_eval_sandbox.py),
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


def test_humaneval_problems_ship_offline():
    problems = load_problems()
    assert len(problems) == 164 and problems[0]["entry_point"] == "has_close_elements"
    assert check_program(problems[0], "    return True\n").endswith("check(has_close_elements)\n")


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
