"""Prepare data: read every source, clean, filter, deduplicate, and split validation off per domain.

The stage is the ordered list of steps below, each following one contract (step.py): typed settings declared
with the step, a result cached under a key of its settings and inputs. Document steps run per work unit in a
process pool; corpus steps read many units at once, decide, and hand each unit its share, which the document
step after them applies:

  read                       readers, Unicode normalization, length bounds                      read_step.py
  dedup_sketch,              exact, near (MinHash LSH) and partial (containment) copies of       dedup_step.py
  find_duplicates, dedup     whole documents, corpus-wide, on the text as read: sketched per
                             unit, decided by sorting on disk (dedup/disk_dedup.py)
  choose_profiles            the filter set of each source that names none, from its            profile_step.py
                             documents' shape (profile_choice.py)
  boilerplate                page chrome: cookie / nav / footer / share lines (not on code)     line_steps.py
  line_counts,               chrome lines found in many documents of one source (not on code)   line_steps.py
  find_repeated_lines,
  repeated_lines
  language                   fastText language ID per prose unit (not on code)                  language_step.py
  quality                    Gopher / C4 / FineWeb rules in the document's language, or the     quality_step.py
                             code-file rules, per profile
  promo                      promotional / spam / templated-text score (not on code)            quality_step.py
  paragraph_sketch,          duplicate paragraphs corpus-wide (not cut out of code: that would   paragraph_step.py
  find_duplicate_paragraphs, break the file), sketched per unit, decided by sorting on disk
  paragraphs                 (dedup/paragraph_copies.py); documents cuts left as skeletons
  draw_validation, split     validation drawn per domain from the clean, deduplicated corpus,   split_step.py
                             within val_max_share of its characters (val_split.py)

Consecutive document steps run together: each unit goes through all of them in one worker task, a document
through one step after the other (step_worker.py), each step keeping its own cached result.

Order matters: copies go first, decided on the text as read (rules that count lines across documents would
otherwise see every line of a copied page as template and cut them all, in every copy); the validation split is
drawn from the *cleaned, deduplicated* corpus, so validation and training come from the same distribution and
no validation document has a duplicate in training. A step named in `data.skip` passes its documents through
unchanged; a rule named in a source's `skip_rules` is not applied to that source. Line rules only ever cut page
chrome or whole wrapped paragraphs (clean/structure.py).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..executor import data_executor
from ..ids import DigestCache, write_json
from .dedup_step import DEDUP, FIND_DUPLICATES, SKETCH
from .language_step import LANGUAGE
from .line_steps import BOILERPLATE, FIND_REPEATED_LINES, LINE_COUNTS, REPEATED_LINES
from .marker_scan import describe, scan_data_dir
from .paragraph_step import FIND_DUPLICATE_PARAGRAPHS, PARAGRAPH_SKETCH, PARAGRAPHS
from .prepare_manifest import build_manifest, log_summary
from .prepare_outputs import merge_ledgers, write_outputs
from .profile_step import CHOOSE_PROFILES
from .quality_step import PROMO, QUALITY
from .read_step import READ
from .split_step import DRAW_VALIDATION, SPLIT
from .step import Corpus, Step, in_runs
from .step_runner import StepRunner
from .token_estimate import SizeEstimate
from .units import plan_units

STEPS: tuple[Step, ...] = (
    READ,
    SKETCH, FIND_DUPLICATES, DEDUP,
    CHOOSE_PROFILES,
    BOILERPLATE,
    LINE_COUNTS, FIND_REPEATED_LINES, REPEATED_LINES,
    LANGUAGE,
    QUALITY,
    PROMO,
    PARAGRAPH_SKETCH, FIND_DUPLICATE_PARAGRAPHS, PARAGRAPHS,
    DRAW_VALIDATION, SPLIT,
)


def prepare_data(cfg: Config, out: Path, size: SizeEstimate) -> dict:
    """size: what the corpus-size verdict needs from the tokenizer and the model (stages.size_estimate)."""
    corpus = Corpus(cfg)
    units = plan_units(cfg, DigestCache(cfg.workdir / ".digests.json"))
    run = StepRunner(units, cfg.workdir / "data" / "cache", data_executor(cfg))
    try:
        for step in in_runs(STEPS):  # consecutive document steps go through each unit together
            step.run(run, corpus)
        train_files, val_summary = run.timed("write", write_outputs, run, out)
        ledger_counts = run.timed("ledger", merge_ledgers, run, out)
        markers = run.timed("markers", scan_data_dir, out)  # reported, documents kept: markers.py says why
    finally:
        run.close()
    manifest = build_manifest(run, corpus, train_files, val_summary, ledger_counts, size)
    manifest["template_markers"] = markers
    manifest["warnings"] += [describe(markers)] if markers["found"] else []  # logged, and in the report
    write_json(out / "stats.json", manifest)
    log_summary(manifest)
    return manifest
