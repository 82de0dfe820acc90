"""A micro model trained in the test goes through the whole ship path: full evaluation (HumanEval included,
even at 0), a rating sheet scored through stdin, the refusal to fine-tune an unevaluated base, SFT, chat,
export to transformers with matching logits; an int8 export evaluated like its checkpoint. Bad input (a foreign
tokenizer) is refused."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scratchlm.cli import main
from scratchlm.eval.sandbox import Isolation, detect
from scratchlm.eval.store import evals_dir
from scratchlm.ids import read_json
from scratchlm.model.checkpoint import list_checkpoints, load_model
from scratchlm.stages import load_config, plan_artifacts, run_all
from ship_fixtures import make_checkpoint

# HumanEval runs model-written code only in the OS sandbox; a machine without one tests the rest (CI has one).
SANDBOX = isinstance(detect(), Isolation) or os.environ.get("SCRATCHLM_REQUIRE_SANDBOX") == "1"
EXTRA = f"""
[eval]
max_batches = 2
max_new_tokens = 8
[eval.suite]
diversity_samples = 2
humaneval = "{'auto' if SANDBOX else 'off'}"
humaneval_problems = 2
humaneval_samples = 2
humaneval_max_new_tokens = 12
[[eval.suite.tasks]]
name = "mc"
path = "mc.jsonl"
kind = "multiple_choice"
[sft]
max_steps = 6
batch_size = 2
"""


@pytest.fixture(scope="module")
def run(builtin_corpus, micro_config, tmp_path_factory):
    d = tmp_path_factory.mktemp("ship")
    path = micro_config(d, builtin_corpus, steps=24, ckpt=12)
    text = path.read_text().replace("[eval]\nmax_batches = 2\nmax_new_tokens = 8\n", "")
    # Sources go last: an [[eval.suite.tasks]] table after them would swallow the [[data.sources]] array.
    head, sep, sources = text.partition("\n[[data.sources]]")
    path.write_text(head + EXTRA + sep + sources)
    (d / "mc.jsonl").write_text(json.dumps({"prompt": "def f(", "choices": ["x):", "<<<"], "answer": 0}) + "\n")
    cfg = load_config(path)
    run_all(cfg)
    return cfg


def cli(monkeypatch, capsys, *args, stdin: str = ""):
    """The CLI in-process (a subprocess per call would re-import torch each time), stdin piped like a terminal."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def test_evaluate_rate_finetune_chat_export(run, tmp_path, monkeypatch, capsys):
    cfg = run
    ckpts = list_checkpoints(plan_artifacts(cfg)["train"].dir / "checkpoints")
    base, unevaluated = ckpts[-1], ckpts[0]
    assert main(["eval", "suite", str(base), "-c", str(cfg.path)]) == 0
    result = read_json(evals_dir(base) / "eval.json")
    assert set(result["domains"]) == {"code", "docs", "web"}
    if SANDBOX:
        assert result["humaneval"]["problems"] == 2 and result["humaneval"]["pass@1"] is not None
        assert result["humaneval"]["pass@10"] is None  # 2 samples cannot estimate pass@10
        assert result["humaneval"]["isolation"] == "bubblewrap"
    assert result["tasks"]["mc"]["items"] == 1 and result["diversity"]["generations"] > 0

    r = cli(monkeypatch, capsys, "eval", "human", base, "-c", cfg.path, "--n", 2)
    assert r.returncode == 0, r.stderr
    sheet = next(evals_dir(base).glob("human-*.json"))
    r = cli(monkeypatch, capsys, "eval", "rate", sheet, stdin="5\n4\n3\n2\n1\n2\n3\n4\n")
    assert r.returncode == 0, r.stderr
    report = (evals_dir(base) / "report.md").read_text()
    assert "Human ratings" in report and "fluent 3.0000 (2/2)" in report
    assert not SANDBOX or "HumanEval" in report and "Model-written code ran in: bubblewrap" in report
    assert ": distinct-2: distinct-2 over" in report  # the suite's verdicts, not only its numbers
    assert main(["report", "-c", str(cfg.path), "--force"]) == 0
    assert "Human ratings" in (cfg.workdir / "report.md").read_text()

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"add {i} and {i}", "response": f"{2 * i}"}) + "\n"
                             for i in range(12)))
    r = cli(monkeypatch, capsys, "sft", "-c", cfg.path, "--data", pairs, "--checkpoint", unevaluated)
    assert r.returncode == 2 and "has no evaluation" in r.stderr
    # 24 micro steps leave the base barely below unigram: refused, naming the numbers; --force fine-tunes it.
    r = cli(monkeypatch, capsys, "sft", "-c", cfg.path, "--data", pairs, "--checkpoint", base)
    assert r.returncode == 2 and "too weak to fine-tune" in r.stderr and "unigram baseline" in r.stderr
    r = cli(monkeypatch, capsys, "sft", "-c", cfg.path, "--data", pairs, "--checkpoint", base, "--force")
    assert r.returncode == 0 and "fine-tuning anyway (--force)" in r.stdout + r.stderr, r.stderr
    summary = read_json(next((cfg.workdir / "sft").glob("*/summary.json")))
    assert summary["leak_check"]["verdict"] in ("ok", "warning") and summary["base_evaluated"]
    # one of the 12 drawn out (sft.heldout_share 10%), its loss measured before the first step and after the last
    assert summary["heldout"]["conversations"] == 1 and summary["conversations"] == 11
    assert [p["step"] for p in summary["heldout_loss"]] == [0, 6]
    assert {v["name"] for v in summary["verdicts"]} == {"held-out loss", "collapse", "memorisation", "epochs"}
    assert "Held-out loss" in (cfg.workdir / "sft" / Path(summary["checkpoint"]).parts[-3] / "report.md").read_text()
    tuned = summary["checkpoint"]

    r = cli(monkeypatch, capsys, "chat", "--checkpoint", tuned, "--max-new-tokens", 5, "--seed", 0,
            stdin="add 3 and 3\n\n")
    assert r.returncode == 0 and "model> " in r.stdout, r.stderr

    transformers = pytest.importorskip("transformers")
    assert main(["export", "--checkpoint", tuned, "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"), dtype=torch.float32).eval()
    model, _, _ = load_model(tuned)
    ids = torch.randint(0, model.vocab_size, (1, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (model(ids)[0] - hf(ids).logits).abs().max().item() < 1e-4


def test_int8_export_evaluates_like_its_checkpoint(run, tmp_path):
    base = list_checkpoints(plan_artifacts(run)["train"].dir / "checkpoints")[-1]
    int8 = tmp_path / "int8"
    assert main(["export", "--checkpoint", str(base), "--quantize", "int8", "--out", str(int8)]) == 0
    for checkpoint in (base, int8):
        if not (evals_dir(checkpoint) / "eval.json").exists():
            assert main(["eval", "suite", str(checkpoint), "-c", str(run.path)]) == 0
    ours, theirs = (read_json(evals_dir(c) / "eval.json")["val_loss"] for c in (int8, base))
    assert abs(ours - theirs) < 0.02 * theirs


def test_checkpoint_with_another_tokenizer_is_refused(run, tmp_path, monkeypatch, capsys):
    foreign = make_checkpoint(tmp_path / "foreign")
    r = cli(monkeypatch, capsys, "eval", "suite", foreign, "-c", run.path)
    assert r.returncode == 2 and "different tokenizer" in r.stderr and "Traceback" not in r.stderr


def test_fine_tuning_on_one_stock_answer_is_judged_collapse(run, tmp_path, monkeypatch, capsys):
    """A planted collapse: every training answer is the same sentence, so the model learns to give it to any
    prompt; held-out questions whose real answers all differ show it, and the verdict says so in the log, summary,
    report and `check`."""
    cfg = run
    base = list_checkpoints(plan_artifacts(cfg)["train"].dir / "checkpoints")[-1]
    stock = "see the manual"
    pairs = tmp_path / "stock.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"what does command{i} do", "response": stock}) + "\n"
                             for i in range(60)))
    cfg.path.with_name("stock_held.jsonl").write_text("".join(
        json.dumps({"prompt": f"what does tool{i} do", "response": f"tool{i} prints {i} lines"}) + "\n"
        for i in range(6)))
    config = cfg.path.with_name("stock.toml")  # beside the run's config: the same workdir and sources
    config.write_text(cfg.path.read_text().replace("[sft]\nmax_steps = 6\nbatch_size = 2\n",
                                                   "[sft]\nmax_steps = 40\nbatch_size = 4\nlr_scale = 1.0\n"
                                                   "answer_max_new_tokens = 12\nanswers = 6\n"
                                                   'heldout = "stock_held.jsonl"\n'))
    config = load_config(config)
    r = cli(monkeypatch, capsys, "sft", "-c", config.path, "--data", pairs, "--checkpoint", base, "--force")
    assert r.returncode == 0, r.stderr
    assert "collapse: ERROR" in r.stderr
    summary = read_json(next(p for p in (config.workdir / "sft").glob("*/summary.json")
                             if read_json(p)["steps"] == 40))
    collapse = next(v for v in summary["verdicts"] if v["name"] == "collapse")
    assert collapse["level"] == "error" and summary["answers"]["heldout_greedy"]["most_common_answer"] == stock
    assert summary["forced"][0]["verdict"] == "base quality"  # the weak base it was forced past
    report = next((config.workdir / "sft").glob(f"*/checkpoints/step_{40:07d}")).parents[1] / "report.md"
    assert report.read_text().startswith("# Fine-tuning report\n\n**Forced:** trained past 1 error verdict")
    assert main(["report", "-c", str(config.path), "--force"]) == 0
    run_report = (config.workdir / "report.md").read_text()
    assert "## Fine-tuning" in run_report and "collapse: ERROR" in run_report
    r = cli(monkeypatch, capsys, "check", "-c", config.path, "--skip-resume")
    line = next(x for x in (r.stdout + r.stderr).splitlines() if "fine-tuning learned, not memorised" in x)
    assert "ERROR" in line.upper() and "collapse" in line and "--force" in line
