"""Build bench/promo_soft_labels.jsonl: soft (B2B) marketing pages against ordinary documentation, for
bench/promo_bench.py.

Items (one JSON object a line: text, label "marketing" or "documentation", origin, split "tune" or "heldout"):
  bench/promo_soft_pages.jsonl   hand-labeled excerpts of stored public web pages (product and feature pages,
                                 vendor case studies and blogs, pricing/SLA pages; and, as hard negatives,
                                 help-centre and docs pages about plans, billing, demos and sales), with the address
  the cleaning benchmark corpus  man pages (en de fr es it pl ru), the Debian Reference (en de fr es it) and the
                                 Python library reference, rendered by bench/cleaning/corpus.py under --root
  /usr/share/doc                 package READMEs

Documentation is cut to a window of WINDOW characters (the scorer measures densities, so a window reads like its
page); files are taken evenly spaced from the sorted list so that no one letter or package dominates. The split is
by a hash of the origin, so an item stays in its part when others are added.

    python bench/promo_soft_labels.py [--root /work/bench-cleaning]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PAGES = BENCH / "promo_soft_pages.jsonl"
OUT = BENCH / "promo_soft_labels.jsonl"
WINDOW = 3000
HELDOUT_SHARE = 3  # one item in 3 is held out
MAN_PICKS = {"man-en": 20, "man-de": 12, "man-fr": 12, "man-es": 10, "man-it": 6, "man-pl": 8, "man-ru": 8}
DEBREF_CHUNKS = 4  # per language: windows at evenly spaced offsets of the concatenated chapters
PYDOC_PICKS = 20
README_PICKS = 12


def evenly(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    return [items[i * len(items) // n] for i in range(n)]


def split_of(origin: str) -> str:
    return "heldout" if int(hashlib.sha1(origin.encode()).hexdigest(), 16) % HELDOUT_SHARE == 0 else "tune"


def _html_text(path: Path) -> str:
    from scratchlm.data.clean.html import extract_main_text

    return extract_main_text(path.read_bytes())


def documentation(root: Path) -> list[dict]:
    corpus = root / "corpus"
    out = []
    for source, n in MAN_PICKS.items():
        for path in evenly(sorted((corpus / source).glob("*.txt")), n):
            out.append({"text": path.read_text(encoding="utf-8")[:WINDOW], "origin": f"{source}/{path.name}"})
    for lang in ("en", "de", "fr", "es", "it"):
        text = "\n".join(_html_text(p) for p in sorted((corpus / f"debref-{lang}").glob("*.html")))
        for i in range(DEBREF_CHUNKS):
            start = (i + 1) * len(text) // (DEBREF_CHUNKS + 1)
            out.append({"text": text[start:start + WINDOW], "origin": f"debref-{lang}@{start}"})
    for path in evenly(sorted((corpus / "pydoc-en").glob("*.html")), PYDOC_PICKS):
        out.append({"text": _html_text(path)[:WINDOW], "origin": f"pydoc-en/{path.name}"})
    readmes = sorted(p for p in Path("/usr/share/doc").glob("*/README*") if p.is_file())
    for path in evenly(readmes, README_PICKS):
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        out.append({"text": raw.decode("utf-8", "replace")[:WINDOW], "origin": str(path)})
    return [{**d, "label": "documentation"} for d in out if len(d["text"].split()) >= 30]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/work/bench-cleaning"), help="bench/cleaning/corpus.py --root")
    args = ap.parse_args()
    pages = [json.loads(line) for line in PAGES.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = pages + documentation(args.root)
    with OUT.open("w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps({"text": item["text"], "label": item["label"], "origin": item["origin"],
                                "split": split_of(item["origin"])}, ensure_ascii=False) + "\n")
    counts: dict[tuple, int] = {}
    for item in items:
        key = (item["label"], split_of(item["origin"]))
        counts[key] = counts.get(key, 0) + 1
    print(f"{len(items)} items -> {OUT}: " + ", ".join(f"{k[0]}/{k[1]} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
