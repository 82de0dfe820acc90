"""structure.parse of the work tree against an earlier revision's: the same classification of every line of real
text, and the CPU time each takes.

    python bench/structure_speed.py                         # against efc5c86 (git show), every source found
    python bench/structure_speed.py --rev HEAD --rounds 5   # another revision, more timing rounds
    python bench/structure_speed.py --src /other/checkout/src/scratchlm/data/clean/structure.py
    python bench/structure_speed.py --sources man,stdlib --limit 300   # some sources, their first 300 documents

Run it with PYTHONPATH=src (the work tree's package is the new side). The sources, each used where it is installed:
- reference: Debian Reference, /usr/share/doc/debian-reference-*/docs/*.html (every language; read as the HTML reader
  reads a page, clean/html.py extract_html)
- handbook: the Debian Administrator's Handbook, /usr/share/doc/debian-handbook/html/{en-US,de-DE,es-ES,fr-FR}
- man: rendered man pages, /work/bench-manpage-units/pages/{es,de,fr}/*.txt (bench/manpage_units.py render)
- stdlib: the standard library's .py files
- pydoc, pypi: the built-in corpus's docs and web domains (data/builtin.py)

Identity: for every document, every line's (text, kind, block, unit) from both; the first difference fails the run
with the document and the line. Speed: the CPU seconds (time.process_time: other jobs share the cores) of parsing
every document, old and new alternating (A B A B ...), and old / new of the sums.
"""
from __future__ import annotations

import argparse
import gc
import sysconfig
import time
from pathlib import Path

from old_revision import module_at

MODULE = "src/scratchlm/data/clean/structure.py"
DEFAULT_REV = "efc5c86"  # the last commit before parse() was rewritten for speed
HANDBOOK_LANGUAGES = ("en-US", "de-DE", "es-ES", "fr-FR")
MAN_PAGES = Path("/work/bench-manpage-units/pages")
SOURCES = ("reference", "handbook", "man", "stdlib", "pydoc", "pypi")


def old_module(rev: str, src: str | None):
    """The earlier structure.py, beside the work tree's."""
    return module_at(rev, MODULE, "scratchlm.data.clean._structure_old", src)


def _html_texts(paths: list[Path]) -> list[tuple[str, str]]:
    from scratchlm.data.clean.html import extract_html

    return [(str(p), extract_html(p.read_bytes()).text) for p in paths]


def documents(sources: list[str], limit: int) -> list[tuple[str, str]]:
    """(id, text) of each document of the sources, in a fixed order; `limit` documents per source at most."""
    docs: list[tuple[str, str]] = []
    for source in sources:
        if source == "reference":
            paths = sorted({p.resolve() for p in Path("/usr/share/doc").glob("debian-reference-*/docs/*.html")})
            found = _html_texts(paths[:limit])
        elif source == "handbook":
            root = Path("/usr/share/doc/debian-handbook/html")
            found = _html_texts(sorted(p for lang in HANDBOOK_LANGUAGES for p in (root / lang).glob("*.html"))[:limit])
        elif source == "man":
            found = [(str(p), p.read_text(errors="replace"))
                     for p in sorted(MAN_PAGES.glob("*/*.txt"))[:limit]]
        elif source == "stdlib":
            root = Path(sysconfig.get_paths()["stdlib"])
            found = []
            for p in sorted(root.rglob("*.py")):
                if "site-packages" in p.parts or len(found) >= limit:
                    continue
                try:
                    found.append((str(p), p.read_text(encoding="utf-8")))
                except (UnicodeDecodeError, OSError):
                    continue
        elif source in ("pydoc", "pypi"):
            from scratchlm.data.builtin import docs_documents, web_documents

            made = docs_documents() if source == "pydoc" else web_documents()
            found = [(d["id"], d["text"]) for d in made][:limit]
        else:
            raise SystemExit(f"unknown source {source!r}; one of {', '.join(SOURCES)}")
        print(f"{source}: {len(found)} documents, {sum(len(t) for _, t in found):,} characters", flush=True)
        docs += [(f"{source}:{doc_id}", text) for doc_id, text in found]
    return docs


def _rows(lines) -> list[tuple]:
    return [(line.text, line.kind, line.block, line.unit) for line in lines]


def check_identity(old, new, docs: list[tuple[str, str]]) -> int:
    """Lines compared; exits at the first line the two parse differently."""
    n = 0
    for doc_id, text in docs:
        a, b = _rows(old.parse(text)), _rows(new.parse(text))
        if a != b:
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise SystemExit(f"DIFFERENT: {doc_id} line {i}: old {a[i] if i < len(a) else None!r}, "
                             f"new {b[i] if i < len(b) else None!r}")
        n += len(a)
    return n


def cpu_seconds(parse, docs: list[tuple[str, str]]) -> float:
    gc.collect()
    start = time.process_time()
    for _, text in docs:
        parse(text)
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default=DEFAULT_REV, help="git revision whose structure.py is the old side")
    ap.add_argument("--src", help="the old side's structure.py as a file (instead of --rev)")
    ap.add_argument("--sources", default=",".join(SOURCES), help="comma-separated, of: " + ", ".join(SOURCES))
    ap.add_argument("--limit", type=int, default=10 ** 9, help="documents per source at most")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds (each times old, then new)")
    args = ap.parse_args()

    from scratchlm.data.clean import structure as new

    old = old_module(args.rev, args.src)
    docs = documents([s for s in args.sources.split(",") if s], args.limit)
    lines = check_identity(old, new, docs)
    print(f"identical: {len(docs)} documents, {lines:,} lines (kind, block, unit, text of every line)")

    new_parse = getattr(new, "_parse", new.parse)  # the parser, not parse()'s memo of the last text
    old_times, new_times = [], []
    for r in range(args.rounds):
        old_times.append(cpu_seconds(old.parse, docs))
        new_times.append(cpu_seconds(new_parse, docs))
        print(f"round {r + 1}: old {old_times[-1]:.2f} s, new {new_times[-1]:.2f} s CPU "
              f"({old_times[-1] / new_times[-1]:.2f}x)", flush=True)
    print(f"old / new CPU: {sum(old_times) / sum(new_times):.2f}x (sums over {args.rounds} rounds; "
          f"best: {min(old_times) / min(new_times):.2f}x)")


if __name__ == "__main__":
    main()
