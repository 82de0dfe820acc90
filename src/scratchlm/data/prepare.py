"""Prepare data: read every source, clean, filter, deduplicate, and split validation off per domain.

The stage is a sequence of named steps (prepare_data below reads top to bottom). Local steps run per work
unit in a process pool and are cached by the content ID of their inputs and settings (step_runner.py);
global steps need the whole corpus and run in between:

  read            readers, Unicode normalization, length bounds                         local
  dedup           exact, near (MinHash LSH) and partial (containment) copies of whole   global -> local
                  documents, corpus-wide, on the text as read
  choose_profiles the filter set of each source that names none, from its documents'     global
                  shape (profile_choice.py)
  boilerplate     page chrome: cookie / nav / footer / share lines (not on code)        local
  line_counts     per-source line document counts                                       local, observes
  repeated_lines  chrome lines found in many documents of one source (not on code)     global -> local
  language        fastText language ID per prose unit (not on code)                     local
  quality         Gopher / C4 / FineWeb rules in the document's language, or the        local
                  code-file rules, per profile
  promo           promotional / spam / templated-text score (not on code)               local
  paragraphs      duplicate paragraphs corpus-wide (not cut out of code: that would     global -> local
                  break the file); documents cuts left as skeletons
  split           validation drawn per domain from the clean, deduplicated corpus,      global -> local
                  within val_max_share of its characters (val_split.py)

Order matters: the validation split is drawn from the *cleaned, deduplicated* corpus, so validation and
training come from the same distribution and no validation document has a duplicate in training. A step
named in `data.skip` passes its documents through unchanged; a rule named in a source's `skip_rules` is not
applied to that source. Line rules only ever cut page chrome or whole wrapped paragraphs (clean/structure.py).
"""
from __future__ import annotations

import os
import shutil
from collections import Counter, defaultdict
from pathlib import Path

from ..config import Config, SourceConfig
from ..errors import UserError
from ..ids import DigestCache, content_id, file_safe, write_json
from ..progress import log
from . import prepare_steps as S
from .dedup_step import document_duplicates, paragraph_duplicates
from .jsonl import read_jsonl, write_jsonl
from .ledger import Ledger
from .prepare_stats import READ_RULES, filter_warnings, reading_notes, summarize
from .profile_choice import choose_profiles, describe
from .quality_config import QualitySettings
from .step_runner import StepRunner
from .token_estimate import measure_ratio, model_params, sample_texts, size_verdict
from .units import Unit, plan_units
from .val_split import SPLIT_FROM, draw_validation, finish_plan


def prepare_data(cfg: Config, out: Path) -> dict:
    d = cfg.data
    sources = {s.name: s for s in d.sources}
    profile = {name: s.filter_profile for name, s in sources.items()}
    keep_languages = {name: tuple(s.languages if s.languages is not None else d.languages)
                      for name, s in sources.items()}
    skip = set(d.skip)

    def prose(unit: Unit) -> bool:
        return profile[unit.source] != "code"

    def enabled(step: str, applies=lambda unit: True):
        return lambda unit: step not in skip and applies(unit)

    cache = cfg.workdir / "data" / "cache"
    units = plan_units(cfg, DigestCache(cfg.workdir / ".digests.json"))
    run = StepRunner(units, cache, d.workers)
    try:
        run.local("read", S.read_doc, S.ReadSettings(d.normalization, d.min_chars, d.max_chars))
        _check_sources_readable(run, sources)
        # Copies go first, decided on the text as read: rules that count lines across documents would
        # otherwise see every line of a copied page as template and cut them all, in every copy.
        doc_decisions, doc_report = run.timed("find_duplicates", document_duplicates, run, d, cache)
        run.local("dedup", S.apply_dedup, state=lambda u: doc_decisions[u.name])
        chosen = run.timed("choose_profiles", choose_profiles, run, sources)
        for name, choice in chosen.items():
            profile[name] = choice["profile"]
            log(f"data: {describe(name, choice)}")
        run.local("boilerplate", S.boilerplate_doc, d.min_chars, applies=enabled("boilerplate", prose))

        run.local("line_counts", S.count_lines, applies=enabled("repeated_lines", prose),
                  finish=S.save_line_counts, writes_docs=False)
        frequent = run.timed("find_repeated_lines", _repeated_lines, run, d, cache)
        run.local("repeated_lines", S.repeated_lines_doc, d.min_chars, state=lambda u: frequent[u.source],
                  applies=enabled("repeated_lines", prose))

        run.local("language", S.language_doc, S.LanguageSettings(d.language_min_score, d.min_chars),
                  state=lambda u: keep_languages[u.source],
                  applies=enabled("language", prose))
        run.local("quality", S.quality_doc, d.min_chars,
                  state=lambda u: QualitySettings.of_source(sources[u.source], d, profile[u.source]),
                  applies=enabled("quality"))
        run.local("promo", S.promo_doc, d.promo_threshold, state=lambda u: profile[u.source],
                  applies=enabled("promo", prose))

        para_decisions, para_report, survivors = run.timed(
            "find_duplicate_paragraphs", paragraph_duplicates, run, d, cache, {u.name for u in units if prose(u)})
        run.local("paragraphs", S.apply_dedup, state=lambda u: para_decisions[u.name])
        dedup_report = {**doc_report, **para_report}

        val_docs, val_plan = run.timed("draw_validation", draw_validation, cfg, survivors)
        run.local("split", S.split_validation, d.min_chars, state=lambda u: sorted(val_docs.get(u.name, {}).items()))

        train_files, val_summary = run.timed("write", _write_outputs, run, out)
        ledger_counts = run.timed("ledger", _merge_ledgers, run, out)
    finally:
        run.close()

    samples = sample_texts(run, d.token_sample_chars // max(len(sources), 1))
    tokens = run.timed("token_estimate", measure_ratio, samples, cfg.tokenizer.vocab_size)
    manifest = summarize(run, cfg, profile, tokens, dedup_report, ledger_counts)
    for name, choice in chosen.items():
        manifest["sources"][name]["profile_choice"] = choice
    manifest["seconds"] = {k: round(v, 3) for k, v in run.seconds.items()}
    manifest.update(validation=val_summary, validation_plan=finish_plan(val_plan, val_summary, d),
                    train_files=train_files)
    manifest["units"] = {u.name: {"source": u.source, "files": [f.doc_id for f in u.files], "bytes": u.bytes,
                                  "steps": {s: str(run.outputs[s][u.name]) for s in manifest["steps"]
                                            if u.name in run.outputs[s]}} for u in units}
    train_tokens = round(sum(s["train"]["tokens_estimated"] for s in manifest["sources"].values()))
    manifest["verdict"] = size_verdict(train_tokens, model_params(cfg), "estimated from the sample ratio")
    manifest["warnings"] = filter_warnings(manifest, keep_languages)
    write_json(out / "stats.json", manifest)
    total_in = sum(s["docs_in"] for s in manifest["sources"].values())
    total_kept = sum(s["docs_kept"] for s in manifest["sources"].values())
    log(f"data: {total_in} documents in, {total_kept} kept, "
        f"{sum(v['docs'] for v in val_summary.values())} held out for validation")
    for line in reading_notes(manifest):
        log(f"data: {line}")
    for warning in manifest["warnings"]:
        log(f"data: warning: {warning}")
    log(f"data: corpus size {manifest['verdict']['level']}: {manifest['verdict']['message']}")
    return manifest


def _check_sources_readable(run: StepRunner, sources: dict[str, SourceConfig]) -> None:
    """A source none of whose documents could even be read is a config mistake, not data to filter."""
    per_source: dict[str, Counter] = defaultdict(Counter)
    for unit in run.units:
        st = run.stats["read"][unit.name]
        per_source[unit.source]["in"] += st["docs_in"]
        per_source[unit.source]["read"] += st["docs_in"] - sum(n for r, n in st["dropped"].items() if r in READ_RULES)
        per_source[unit.source].update({r: n for r, n in st["dropped"].items() if r in READ_RULES})
    for name, c in per_source.items():
        if c["in"] and not c["read"]:
            rule, n = max(((r, n) for r, n in c.items() if r not in ("in", "read")), key=lambda x: x[1])
            raise UserError(f"source `{name}` ({sources[name].path}): none of its {c['in']} documents could be "
                            f"read; top reason: {rule} ({n} of {c['in']}){_first_record(run, name, rule)}")


def _first_record(run: StepRunner, source: str, rule: str) -> str:
    """`, e.g. ID: detail` from the read step's ledger: the file, and for a damaged one where."""
    for unit in run.units:
        if unit.source == source:
            for path in sorted(run.outputs["read"][unit.name].glob("rejected-*.jsonl.zst")):
                for record in read_jsonl(path):
                    if record["rule"] == rule:
                        return f", e.g. {record['id']}: {record['detail']}"
    return ""


EDGE_SHARE = 0.8  # a frequent line is template when it is among a page's first or last lines this often


def _repeated_lines(run: StepRunner, d, cache: Path) -> dict[str, str]:
    """Corpus-wide step: per source, the lines found in many of its documents. Returns source -> path of a
    .npy of their line hashes relative to the cache, named by what it was computed from (so the path works as a
    cache key, and still does after the workdir moved)."""
    import numpy as np

    from .clean.boilerplate import RepeatedLineFinder

    paths = {}
    for source in dict.fromkeys(u.source for u in run.units):
        sides = [run.outputs["line_counts"][u.name] for u in run.units
                 if u.source == source and u.name in run.outputs["line_counts"]]
        if not sides:
            continue
        key = content_id("repeated_lines", [p.name for p in sides], d.repeated_line_min_docs,  # names: content IDs
                         d.repeated_line_min_share, EDGE_SHARE)
        path = cache / "repeated_lines" / f"{file_safe(source)}-{key}.npy"
        if not path.exists():
            finder, edges = RepeatedLineFinder(), RepeatedLineFinder()
            for side in sides:
                n_docs = int(np.load(side / "n_docs.npy")[0])
                finder.add_table(np.load(side / "keys.npy"), np.load(side / "counts.npy"), n_docs)
                edges.add_table(np.load(side / "edge_keys.npy"), np.load(side / "edge_counts.npy"), n_docs)
            frequent = finder.frequent(d.repeated_line_min_docs, d.repeated_line_min_share)
            # Template lines sit at the edges of the pages that hold them; a note that recurs in the body
            # ("New in version 3.3.") and sometimes ends a page is content.
            keys, counts = finder.table()
            chrome = set(keys[edges.counts_of(keys) >= EDGE_SHARE * counts].tolist())
            frequent = np.array(sorted(frequent & chrome), dtype=np.uint64)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.npy")
            np.save(tmp, frequent)
            os.replace(tmp, path)
        paths[source] = path.relative_to(cache).as_posix()
    return paths


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # the cache keeps its copy; a hard link costs no space
    except OSError:
        shutil.copyfile(src, dst)


def _write_outputs(run: StepRunner, out: Path) -> tuple[dict[str, list[str]], dict]:
    for sub in ("train", "val"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    train_files: dict[str, list[str]] = defaultdict(list)
    val_docs: dict[str, list[dict]] = defaultdict(list)
    for unit in run.units:
        train_files.setdefault(unit.source, [])
        result = run.outputs["split"][unit.name]
        if (result / "docs-00000.jsonl.zst").exists():
            _link(result / "docs-00000.jsonl.zst", out / "train" / f"{unit.name}.jsonl.zst")
            train_files[unit.source].append(f"{unit.name}.jsonl.zst")
        if (result / "val-00000.jsonl.zst").exists():
            val_docs[unit.domain] += read_jsonl(result / "val-00000.jsonl.zst")
    val_summary = {}
    for domain, docs in sorted(val_docs.items()):
        write_jsonl(out / "val" / f"{domain}.jsonl", docs)
        val_summary[domain] = {"docs": len(docs), "chars": sum(len(x["text"]) for x in docs),
                               "pieces": sum(SPLIT_FROM in x for x in docs)}
    return dict(train_files), val_summary


def _merge_ledgers(run: StepRunner, out: Path) -> dict[str, Counter]:
    """Every step's rejections of every unit into the stage's ledger, in step order."""
    for old in out.glob("rejected-*.jsonl.zst"):
        old.unlink()
    ledger = Ledger(out)
    for path in run.ledgers():
        for record in read_jsonl(path):
            ledger.add(record)
    ledger.close()
    return ledger.counts
