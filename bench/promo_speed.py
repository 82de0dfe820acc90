"""promo_score and the language step's prose-line filter (langid._prose_lines) of the work tree against an earlier
revision's, side by side in one process: the same output on every document, and the CPU time each takes.

    PYTHONPATH=src python bench/promo_speed.py                 # against efc5c86 (git show), 2 rounds
    PYTHONPATH=src python bench/promo_speed.py --rev HEAD~3 --rounds 3

The documents: the rendered man pages in /work/bench-manpage-units/pages/{es,de,fr} (bench/manpage_units.py
render), the standard library's top-level .py files, the pydoc topics, and the marketing and documentation pages of
bench/promo_soft_pages.jsonl. Identity: every PromoScore field (templates on and off) and every _prose_lines
result equal; the first difference fails the run. Speed: CPU seconds (time.process_time: other jobs may share the
cores), old and new alternating, and old / new.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import sysconfig
import time
from pathlib import Path

from old_revision import REPO, module_at

DEFAULT_REV = "efc5c86"  # the last commit before promo_score and _prose_lines were rewritten for speed
MAN_PAGES = Path("/work/bench-manpage-units/pages")


def old_module(rev: str, name: str):
    """src/scratchlm/data/clean/<name>.py at `rev`, beside the work tree's."""
    return module_at(rev, f"src/scratchlm/data/clean/{name}.py", f"scratchlm.data.clean._{name}_old")


def documents() -> list[str]:
    texts = [p.read_text(errors="replace") for p in sorted(MAN_PAGES.glob("*/*.txt"))]
    texts += [p.read_text(errors="replace") for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))]
    from pydoc_data.topics import topics

    texts += [topics[k] for k in sorted(topics)]
    pages = REPO / "bench" / "promo_soft_pages.jsonl"
    texts += [json.loads(line)["text"] for line in pages.read_text().splitlines() if line.strip()]
    return texts


def cpu_seconds(fn, texts: list[str]) -> float:
    t0 = time.process_time()
    for text in texts:
        fn(text)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default=DEFAULT_REV)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from scratchlm.data.clean import langid, promo

    old_promo, old_langid = old_module(args.rev, "promo"), old_module(args.rev, "langid")
    texts = documents()
    for text in texts:
        for templates in (True, False):
            old, new = (dataclasses.astuple(m.promo_score(text, templates)) for m in (old_promo, promo))
            assert old == new, (text[:200], templates, old, new)
        assert old_langid._prose_lines(text) == langid._prose_lines(text), text[:200]
    print(f"identical: {len(texts)} documents, {sum(map(len, texts)) / 1e6:.1f} M characters "
          f"(promo_score with templates on and off, _prose_lines)")
    cases = {"promo_score (templates off)": (lambda m: lambda t: m.promo_score(t, False), old_promo, promo),
             "promo_score (templates on)": (lambda m: lambda t: m.promo_score(t, True), old_promo, promo),
             "_prose_lines": (lambda m: m._prose_lines, old_langid, langid)}
    for name, (fn, old, new) in cases.items():
        old_s = new_s = 0.0
        for _ in range(args.rounds):
            old_s += cpu_seconds(fn(old), texts)
            new_s += cpu_seconds(fn(new), texts)
        print(f"{name}: old {old_s / args.rounds:.2f} s, new {new_s / args.rounds:.2f} s CPU per round, "
              f"{old_s / new_s:.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
