"""The stage's stats.json: the accounting of every step (prepare_stats.py), what the corpus steps decided (the
profiles chosen, the dedup report, the validation plan), the token estimate and the corpus-size verdict."""
from __future__ import annotations

from collections import Counter

from ..progress import log
from .dedup_step import FIND_DUPLICATES
from .language_step import wanted_languages
from .paragraph_step import FIND_DUPLICATE_PARAGRAPHS
from .prepare_stats import filter_warnings, reading_notes, summarize
from .profile_step import chosen, profile
from .split_step import DRAW_VALIDATION
from .step import Corpus
from .step_runner import StepRunner
from .token_estimate import SizeEstimate, sample_texts, size_verdict
from .val_split import ValidationSettings, finish_plan


def build_manifest(run: StepRunner, corpus: Corpus, train_files: dict[str, list[str]], val_summary: dict,
                   ledger_counts: dict[str, Counter], size: SizeEstimate) -> dict:
    cfg, d = corpus.cfg, corpus.data
    samples = sample_texts(run, d.token_sample_chars // max(len(corpus.sources), 1))
    tokens = run.timed("token_estimate", size.tokens_per_char, samples, cfg.tokenizer.vocab_size)
    profiles = {name: profile(corpus, name) for name in corpus.sources}
    dedup_report = {**corpus.decision(FIND_DUPLICATES).result,
                    **corpus.decision(FIND_DUPLICATE_PARAGRAPHS).result["report"]}
    manifest = summarize(run, cfg, profiles, tokens, dedup_report, ledger_counts)
    for name, choice in chosen(corpus).items():
        manifest["sources"][name]["profile_choice"] = choice
    manifest["seconds"] = {k: round(v, 3) for k, v in run.seconds.items()}
    manifest["peak_mib"] = {k: round(v, 1) for k, v in run.peak_mib.items()}
    val_plan = corpus.decision(DRAW_VALIDATION).result["plan"]
    manifest.update(validation=val_summary,
                    validation_plan=finish_plan(val_plan, val_summary, ValidationSettings.of(corpus)),
                    train_files=train_files)
    manifest["units"] = {u.name: {"source": u.source, "files": [f.doc_id for f in u.files], "bytes": u.bytes,
                                  "steps": {s: str(run.outputs[s][u.name]) for s in manifest["steps"]
                                            if u.name in run.outputs[s]}} for u in run.units}
    train_tokens = round(sum(s["train"]["tokens_estimated"] for s in manifest["sources"].values()))
    manifest["verdict"] = size_verdict(train_tokens, size.model_params, "estimated from the sample ratio")
    keep = {name: wanted_languages(d, source) for name, source in corpus.sources.items()}
    manifest["warnings"] = filter_warnings(manifest, keep)
    return manifest


def log_summary(manifest: dict) -> None:
    sources, validation = manifest["sources"].values(), manifest["validation"].values()
    log(f"data: {sum(s['docs_in'] for s in sources)} documents in, {sum(s['docs_kept'] for s in sources)} kept, "
        f"{sum(v['docs'] for v in validation)} held out for validation")
    for line in reading_notes(manifest):
        log(f"data: {line}")
    for warning in manifest["warnings"]:
        log(f"data: warning: {warning}")
    log(f"data: corpus size {manifest['verdict']['level']}: {manifest['verdict']['message']}")
    if line := memory_line(manifest["peak_mib"]):
        log(f"data: {line}")


def memory_line(peak_mib: dict[str, float]) -> str | None:
    """Which step raised this process's peak memory most: the one to look at on a corpus that does not fit.
    The first entry is the peak before any step ran (the imports)."""
    steps, (before, *_) = [], peak_mib.values() or [0.0]
    for step, peak in list(peak_mib.items())[1:]:
        steps.append((peak - before, step))
        before = max(before, peak)
    if not steps or not before:
        return None
    grew, step = max(steps)
    return f"peak memory of the main process {before:,.0f} MiB; {step} raised it most (+{grew:,.0f} MiB)"
