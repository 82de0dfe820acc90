"""`scratchlm quickstart`: build the built-in corpus and run every stage with a preset sized for 2 CPU cores."""
from __future__ import annotations

from pathlib import Path

from .stages import load_config
from .config_template import render_config
from .data.builtin import build_builtin_corpus

CODE_CHARS = 4_000_000  # the stdlib is ~30 MB; a 4 MB sample keeps the quickstart within its 10-minute budget
PRESET = {
    "run": {"workdir": ".", "demo": True},  # see plan/demo.py: what a 10-minute CPU demo cannot avoid
    "data": {"min_chars": 200, "val_fraction": 0.1, "val_max_docs": 60, "unit_mb": 1},
    "tokenizer": {"vocab_size": 4096, "sample_chars": 5_000_000},
    "model": {"preset": "tiny"},
    # Muon: 0.24 nats lower mean validation loss than AdamW after the same 600 steps, for ~9% more time per step
    # (docs/benchmarks.md, "The quickstart"). Halving the batch for twice the steps, or doubling
    # Muon's LR, moved it by less than two AdamW seeds differ (0.06): not worth a second change.
    "train": {"max_steps": 600, "batch_size": 16, "optimizer": "muon", "learning_rate": 3e-3, "warmup_steps": 50,
              "checkpoint_every": 200, "eval_every": 200, "log_every": 10, "weight_decay": 0.1},
    "eval": {"max_batches": 8, "max_new_tokens": 48},
}


def prepare_quickstart(workdir: Path, max_steps: int | None = None) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = workdir / "corpus"
    if not (corpus / "code.jsonl").exists():
        build_builtin_corpus(corpus, code_max_chars=CODE_CHARS)
    # The docs and web sources are documentation and READMEs full of code examples and Markdown: the technical
    # filter set, not the web-crawl one, which would cut most of them. The weights follow the sources' sizes
    # (code ~1M tokens, web ~260K, docs ~100K), so that 600 steps read none of them more than ~3 times.
    sources = [{"name": d, "domain": d, "path": f"corpus/{d}.jsonl", "format": "jsonl", "weight": w,
                "profile": profile}
               for d, w, profile in (("code", 1.0, "code"), ("docs", 0.15, "technical"), ("web", 0.5, "technical"))]
    preset = {k: dict(v) for k, v in PRESET.items()}
    if max_steps:
        preset["train"]["max_steps"] = max_steps
        preset["train"]["checkpoint_every"] = preset["train"]["eval_every"] = max(1, max_steps // 2)
    path = workdir / "scratchlm.toml"
    text = render_config(sources, preset)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def run_quickstart(workdir: Path, max_steps: int | None = None) -> dict:
    from .progress import log
    from .stages import run_all

    log("quickstart: a 10-minute CPU demo of every stage on the built-in corpus. Its model is far larger than "
        "this corpus supports (run.demo = true in its config): the corpus-size error is expected and does not stop "
        "it, and the end of the run lists what else is inherent to a demo this small.")
    return run_all(load_config(prepare_quickstart(workdir, max_steps)))
