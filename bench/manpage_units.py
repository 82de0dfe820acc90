"""Option descriptions and sections cut from their heads by the language step, on real half-translated man pages
(issue 37, part 2).

    python bench/manpage_units.py render                   # man -l | col -bx: the pages of manpages-es/-de/-fr
    python bench/manpage_units.py run --system before      # the language step of BEFORE_COMMIT (git archive)
    python bench/manpage_units.py run --system after       # the language step of the work tree
    python bench/manpage_units.py score                    # bare options, empty headings, cuts: before / after
    python bench/manpage_units.py sample --n 60            # evenly spread removals of `after`, in their page
    python bench/manpage_units.py time --system before     # seconds of parse and language_doc, every third page

Each page runs alone through the language step (language_doc, the page's own language kept, the default
settings), in a subprocess whose PYTHONPATH is the system's source tree. The step's cut is caught where it calls
`without(lines, cut)`, so both systems are scored on the same line indices, by the same test below: a line with
something indented deeper right under it in the page (an option over its description, a section heading over its
body, a term over its definition) is *left bare* when it is kept and none of what was under it is.
Work files live under --root (default /work/bench-manpage-units): pages/<lang>/, runs/<system>.jsonl.
See docs/benchmarks.md, "Option descriptions kept with their options (issue 37, bench/manpage_units.py)".
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE_COMMIT = "aa14478"  # the last commit before heads went with their emptied spans
LANGUAGES = ("es", "de", "fr")
MAN_ROOT = Path("/usr/share/man")


def render(root: Path) -> None:
    env = {**os.environ, "LANG": "C.UTF-8", "MANWIDTH": "80"}
    for lang in LANGUAGES:
        out = root / "pages" / lang
        out.mkdir(parents=True, exist_ok=True)
        for page in sorted(p for p in (MAN_ROOT / lang).rglob("*") if p.is_file() and not p.is_symlink()):
            target = out / (page.name.removesuffix(".gz") + ".txt")
            if not target.exists():
                roff = subprocess.run(["man", "-l", str(page)], env=env, capture_output=True).stdout
                target.write_bytes(subprocess.run(["col", "-bx"], input=roff, env=env, capture_output=True).stdout)
        print(f"{lang}: {len(list(out.glob('*.txt')))} pages in {out}")


def pages(root: Path, per_language: int) -> list[Path]:
    """Up to per_language pages of each language, evenly spaced in name order."""
    chosen = []
    for lang in LANGUAGES:
        found = sorted(p for p in (root / "pages" / lang).glob("*.txt") if p.stat().st_size)
        step = max(len(found) / per_language, 1.0)
        chosen += [found[int(k * step)] for k in range(min(per_language, len(found)))]
    return chosen


def source_tree(system: str, root: Path) -> Path:
    if system == "after":
        return REPO / "src"
    tree = root / f"src-{BEFORE_COMMIT}"
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE_COMMIT, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree / "src"


def run(system: str, root: Path, per_language: int) -> None:
    out = root / "runs" / f"{system}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(source_tree(system, root))}
    listing = "\n".join(str(p) for p in pages(root, per_language))
    with open(out, "w") as f:
        subprocess.run([sys.executable, __file__, "worker"], input=listing, text=True, env=env, stdout=f, check=True)
    print(f"{system}: {out}")


def worker() -> None:
    """One JSON line per page: what the language step cut (line indices) and recorded."""
    import scratchlm.data.language_step as step

    assert Path(step.__file__).resolve().is_relative_to(Path(os.environ["PYTHONPATH"]).resolve()), step.__file__
    caught: list[set[int]] = []
    plain_without = step.without
    step.without = lambda lines, cut: (caught.append(set(cut)), plain_without(lines, cut))[1]

    class Context:  # what language_doc calls on its StepContext
        def __init__(self, lang: str):
            self.settings, self.records, self.dropped = step.LanguageSettings(0.65, 200, (lang,)), [], None

        def note(self, *_): pass

        def skips(self, _): return False

        def drop(self, doc_id, rule, detail="", text="", score=None):
            self.dropped = rule

        def removed(self, doc_id, rule, pieces, level, detail="", original=None):
            from scratchlm.data.clean.structure import piece_contexts
            self.records += [{"rule": rule, "detail": detail, "text": p, "context": c}
                             for p, c in zip(pieces, piece_contexts(original, pieces))]

    for path in sys.stdin.read().split():
        lang, text = Path(path).parent.name, Path(path).read_text()
        caught.clear()
        ctx = Context(lang)
        step.language_doc({"id": path, "text": text, "chars_read": len(text)}, ctx)
        print(json.dumps({"page": path, "lang": lang, "dropped": ctx.dropped,
                          "cut": sorted(set().union(*caught)), "records": ctx.records}), flush=True)


def time_step(system: str, root: Path) -> None:
    """Seconds `parse` and `language_doc` take over every third page, best of 2, in the system's source tree."""
    env = {**os.environ, "PYTHONPATH": str(source_tree(system, root))}
    listing = "\n".join(str(p) for p in pages(root, 10 ** 6)[::3])
    subprocess.run([sys.executable, __file__, "timer"], input=listing, text=True, env=env, check=True)


def timer() -> None:
    import time

    import scratchlm.data.language_step as step
    from scratchlm.data.clean.structure import parse

    class Context:  # the calls language_doc makes, doing nothing
        def __init__(self, lang: str):
            self.settings = step.LanguageSettings(0.65, 200, (lang,))

        def __getattr__(self, name):
            return lambda *a, **k: False

    docs = [(Path(p).parent.name, Path(p).read_text()) for p in sys.stdin.read().split()]
    runs = {"parse": lambda lang, text: parse(text),
            "language_doc": lambda lang, text: step.language_doc({"id": "x", "text": text, "chars_read": len(text)},
                                                                 Context(lang))}
    for name, run in runs.items():
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            for lang, text in docs:
                run(lang, text)
            best = min(best, time.perf_counter() - start)
        print(f"{name}: {len(docs)} pages, {best:.2f} s")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _tag_like(line: str) -> bool:
    """A few words, no sentence, not a field with its value: "--addresses", "sll_halen"."""
    s = line.strip()
    return len(s.split()) <= 8 and ": " not in s and not s.endswith((".", ":", ";", ","))


def left_bare(text: str, cut: set[int]) -> list[tuple[int, str]]:
    """(line, kind) of each kept line that had something indented deeper under it (after the tags stacked right
    below it at its own indentation: "-a" over "--addresses") and has none of it now. Kind: "option" (starts with
    - or +), "heading" (at the page's left edge or a subsection's), "term" (any other)."""
    raw = text.split("\n")
    filled = [i for i, line in enumerate(raw) if line.strip()]
    after = dict(zip(filled, filled[1:]))
    bare = []
    for i in filled:
        if i in cut:
            continue
        k, j = i, after.get(i)
        while j is not None and j == k + 1 and _indent(raw[j]) == _indent(raw[i]) and _tag_like(raw[j]):
            k, j = j, after.get(j)  # a tag stacked right under this one
        under = []
        while j is not None and _indent(raw[j]) > _indent(raw[i]):
            under.append(j)
            j = after.get(j)
        if under and all(k in cut for k in under):
            s = raw[i].lstrip()
            bare.append((i, "option" if s[:1] in "-+" else "heading" if _indent(raw[i]) <= 3 else "term"))
    return bare


def left_beside_cuts(text: str, cut: set[int], lang: str) -> int:
    """Lines kept from a block (lines at one indentation, no blank line between) that the cut took part of, when
    what is kept of it reads as another language than the page's: a sentence left behind by a cut paragraph."""
    from scratchlm.data.clean.langid import detect_language

    raw, left, i = text.split("\n"), 0, 0
    while i < len(raw):
        j = i + 1
        while raw[i].strip() and j < len(raw) and raw[j].strip() and _indent(raw[j]) == _indent(raw[i]):
            j += 1
        kept = [k for k in range(i, j) if k not in cut and raw[k].strip()]
        if kept and len(kept) < j - i and detect_language(" ".join(raw[k] for k in kept))[0] != lang:
            left += len(kept)
        i = j
    return left


def load(root: Path, system: str) -> list[dict]:
    return [json.loads(line) for line in (root / "runs" / f"{system}.jsonl").read_text().splitlines()]


def score(root: Path) -> None:
    systems = [s for s in ("before", "after") if (root / "runs" / f"{s}.jsonl").exists()]
    rows: dict[str, dict[str, dict[str, int]]] = {}
    for system in systems:
        for page in load(root, system):
            r = rows.setdefault(page["lang"], {}).setdefault(system, dict.fromkeys(
                ("pages", "pages cut", "removals", "lines cut", "option", "term", "heading", "left"), 0))
            r["pages"] += 1
            if page["dropped"] or not page["cut"]:
                continue
            r["pages cut"] += 1
            r["removals"] += len(page["records"])
            r["lines cut"] += len(page["cut"])
            text = Path(page["page"]).read_text()
            for _, kind in left_bare(text, set(page["cut"])):
                r[kind] += 1
            r["left"] += left_beside_cuts(text, set(page["cut"]), page["lang"])
    columns = {"pages cut": "pages with cuts", "removals": "removals recorded", "lines cut": "lines cut",
               "option": "bare options", "term": "bare terms", "heading": "empty headings",
               "left": "foreign lines left beside cuts"}
    print("| language | pages | " + " | ".join(f"{v} ({'/'.join(systems)})" for v in columns.values()) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    for lang, by in rows.items():
        cells = ["/".join(str(by[s][k]) for s in systems) for k in columns]
        print(f"| {lang} | {by[systems[0]]['pages']} | " + " | ".join(cells) + " |")


def sample(root: Path, n: int, system: str, heads_only: bool) -> None:
    """Every len/n-th removal record of the system, in page order, shown in its page: ">>" its lines, "x " lines
    other records cut, three lines around (blank lines too: they end paragraphs). To read and judge both the cut
    and what was kept beside it. heads_only: the records that took a head with its span."""
    records = [(page, r) for page in load(root, system) for r in page["records"]
               if not heads_only or "nothing under it" in r["detail"]]
    step = max(len(records) / n, 1.0)
    for k in range(min(n, len(records))):
        page, r = records[int(k * step)]
        raw, piece, cut = Path(page["page"]).read_text().split("\n"), r["text"].split("\n"), set(page["cut"])
        at = next(i for i in range(len(raw)) if raw[i:i + len(piece)] == piece)
        shown = [(">> " if at <= i < at + len(piece) else "x  " if i in cut else "   ") + raw[i]
                 for i in range(max(at - 3, 0), min(at + len(piece) + 3, len(raw)))]
        if len(shown) > 22:
            shown = shown[:14] + [f"   [... {len(shown) - 20} lines]"] + shown[-6:]
        print(f"### {k + 1}/{min(n, len(records))}  {page['lang']}/{Path(page['page']).name}  [{r['detail']}]")
        print("\n".join(shown) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/work/bench-manpage-units"))
    ap.add_argument("--per-language", type=int, default=400, help="pages per language, evenly spaced (400)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("render")
    r = sub.add_parser("run")
    r.add_argument("--system", choices=("before", "after"), required=True)
    sub.add_parser("score")
    s = sub.add_parser("sample")
    s.add_argument("--n", type=int, default=60)
    s.add_argument("--system", choices=("before", "after"), default="after")
    s.add_argument("--heads", action="store_true", help="only the removals that took a head with its span")
    t = sub.add_parser("time")
    t.add_argument("--system", choices=("before", "after"), required=True)
    sub.add_parser("worker")
    sub.add_parser("timer")
    args = ap.parse_args()
    if args.cmd == "render":
        render(args.root)
    elif args.cmd == "run":
        run(args.system, args.root, args.per_language)
    elif args.cmd == "score":
        score(args.root)
    elif args.cmd == "sample":
        sample(args.root, args.n, args.system, args.heads)
    elif args.cmd == "time":
        time_step(args.system, args.root)
    elif args.cmd == "timer":
        timer()
    else:
        worker()


if __name__ == "__main__":
    main()
