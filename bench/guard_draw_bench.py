"""The validation draw step (data/split_step.draw), an older revision's and this checkout's, side by side on one
prepared corpus: the same decision (chosen, plan, near_copied, byte for byte as result.json holds it), how many
times each read and scanned the corpus, and the CPU seconds each took (this process and its pool's workers).

The steps before the draw run once through the prepare stage's cache in --work (a second run reads them from
cache); then each implementation decides on the same context, --repeat times, alternating.

    PYTHONPATH=src python bench/guard_draw_bench.py --corpus encodings --work /tmp/gdb-enc
    PYTHONPATH=src python bench/guard_draw_bench.py --corpus builtin --work /tmp/gdb-builtin
    PYTHONPATH=src python bench/guard_draw_bench.py --corpus core --work /tmp/gdb-core
    PYTHONPATH=src python bench/guard_draw_bench.py --corpus quickstart --work /tmp/gdb-qs
    PYTHONPATH=src python bench/guard_draw_bench.py --corpus /work/bench-near-copies/corpus.jsonl --work /tmp/gdb-94
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from old_revision import module_at

MICRO = """
[run]
workdir = "run"
demo = true
[data]
{data}
[decontaminate]
workers = 1
"""


def config(corpus: str, work: Path) -> Path:
    from scratchlm.data.builtin import build_builtin_corpus
    from scratchlm.quickstart import prepare_quickstart

    work.mkdir(parents=True, exist_ok=True)
    if corpus == "quickstart":
        return prepare_quickstart(work)
    if corpus == "encodings":
        import encodings
        sources = {"code": f"{Path(encodings.__file__).parent}/*.py"}
    elif corpus in ("builtin", "core"):  # the test suite's builtin_corpus and core_corpus (tests/conftest.py)
        if not (work / "corpus" / "code.jsonl").exists():
            skip = {}
            if corpus == "core":
                spec = importlib.util.spec_from_file_location("conftest", Path(__file__).parent.parent / "tests" /
                                                              "conftest.py")
                conftest = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(conftest)
                skip = {"web_skip": conftest._installed() - (conftest._closure(["scratchlm"], skip={"ray"}) -
                                                             {"scratchlm"})}
            build_builtin_corpus(work / "corpus", code_max_chars=300_000, **skip)
        sources = {d: str(work / "corpus" / f"{d}.jsonl") for d in ("code", "docs", "web")}
    else:  # a JSONL file of real text: the draw's defaults
        sources = {"text": corpus}
    # the test suite's micro config (tests/conftest.py), or the defaults on real text
    data = "min_chars = 100\nval_fraction = 0.1\nval_max_docs = 8" if corpus in ("encodings", "builtin", "core") else ""
    text = MICRO.format(data=data)
    text += "".join(f'\n[[data.sources]]\nname = "{d}"\ndomain = "{d}"\npath = "{p}"\n' for d, p in sources.items())
    path = work / "scratchlm.toml"
    path.write_text(text)
    return path


def load_revision(rev: str):
    """split_step.py as it was at `rev`, imported beside this checkout's modules."""
    return module_at(rev, "src/scratchlm/data/split_step.py", "scratchlm.data.split_step_old")


def cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="encodings", help="encodings, builtin, core, quickstart or a JSONL path")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--old", default="efc5c86", help="the revision to compare with")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=None, help="data.workers for the draw (default: the config's)")
    args = ap.parse_args()

    from scratchlm.data import split_step
    from scratchlm.data.prepare import STEPS
    from scratchlm.data.step import Corpus, CorpusContext
    from scratchlm.data.step_runner import StepRunner
    from scratchlm.data.units import plan_units
    from scratchlm.data.val_split import ValidationSettings
    from scratchlm.executor import data_executor
    from scratchlm.ids import DigestCache
    from scratchlm.stages import load_config

    cfg = load_config(config(args.corpus, args.work))
    old = load_revision(args.old)
    corpus = Corpus(cfg)
    units = plan_units(cfg, DigestCache(cfg.workdir / ".digests.json"))
    run = StepRunner(units, cfg.workdir / "data" / "cache", data_executor(cfg))
    if args.workers:
        run.workers = args.workers
    try:
        t0 = time.perf_counter()
        for step in STEPS[:STEPS.index(split_step.DRAW_VALIDATION)]:
            step.run(run, corpus)
        print(f"steps before the draw: {time.perf_counter() - t0:.1f} s wall (cached after the first run)")
        settings = ValidationSettings.of(corpus)
        passes = {"n": 0, "docs": 0}
        iter_docs = run.iter_docs

        def counted(units=None):
            passes["n"] += 1
            for pair in iter_docs(units):
                passes["docs"] += 1
                yield pair

        run.iter_docs = counted
        corpus_docs = corpus_chars = 0
        for _, doc in iter_docs(units):
            corpus_docs, corpus_chars = corpus_docs + 1, corpus_chars + len(doc["text"])
        print(f"clean corpus: {corpus_docs} documents, {corpus_chars:,} characters; data.workers {run.workers}, "
              f"GUARD_PARALLEL_CHARS {split_step.GUARD_PARALLEL_CHARS:,}")
        results = {}
        for rep in range(args.repeat):
            for name, module in (("old", old), ("new", split_step)):
                passes.update(n=0, docs=0)
                with tempfile.TemporaryDirectory() as out:
                    c0, w0 = cpu_seconds(), time.perf_counter()
                    result = module.draw(CorpusContext(run, corpus, settings, units, Path(out)))
                    cpu, wall = cpu_seconds() - c0, time.perf_counter() - w0
                text = json.dumps(result, indent=2)
                if name in results and results[name] != text:
                    raise SystemExit(f"{name}: a different decision on the repeat")
                results[name] = text
                print(f"{name} (rep {rep}): {cpu:.2f} CPU s ({wall:.2f} s wall), {passes['n']} passes over the "
                      f"corpus, {passes['docs'] / corpus_docs:.1f} corpus reads of {corpus_docs} documents; "
                      f"{len(result['near_copied'])} put back, "
                      f"{sum(map(len, result['chosen'].values()))} drawn")
        print("identical decision (result.json bytes):", results["old"] == results["new"])
        if results["old"] != results["new"]:
            sys.exit(1)
    finally:
        run.close()


if __name__ == "__main__":
    main()
