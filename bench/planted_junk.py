"""Planted junk: is what the cleaning stage exists to remove still removed?

Real prose (tests/fixtures/prose: Debian documentation in German, French, Spanish and Dutch) gets planted junk of
every kind the filters target, then `scratchlm data prepare` runs on it with the default `prose` profile and
each source's language. The script reports, per kind, how many planted items were removed, and how much of the
real prose was kept.

    PYTHONPATH=src python bench/planted_junk.py                          # the work tree
    python bench/planted_junk.py --src /path/to/other/checkout/src       # another version, side by side

Kinds: page chrome (a nav bar above and a cookie banner and copyright footer below a real page), promotional
pages, keyword-stuffed spam, a page pasted over and over, exact copies, near copies (a few words changed and a
different footer), partial copies (most of a page plus a new paragraph), gibberish, and binary files.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("de", "fr", "es", "nl")
NAV = "Home | Products | Support | About us | Contact"
COOKIE = "We use cookies to improve your experience. By continuing to browse, you agree to our use of cookies."
FOOTER = "© 2024 Example Media Ltd. All rights reserved."
PRODUCTS = ["laptop", "phone", "sofa", "watch", "camera", "headphones", "mattress", "blender", "bicycle", "drone"]


def promo(rng: random.Random) -> str:
    p = rng.choice(PRODUCTS)
    lines = [f"BEST {p.upper()} DEALS! Buy now and save {rng.randint(20, 70)}% off!",
             f"Limited time offer on every {p}, free shipping on every order! Click here to get yours today!",
             "Amazing prices, exclusive discounts, guaranteed satisfaction! Shop now! Don't miss out!",
             f"Only ${rng.randint(5, 99)}.99! Order today and sign up for our newsletter to get a free gift!",
             f"Hurry, act now! The finest {p}s with the lowest prices and the best bargains anywhere in the world!"]
    rng.shuffle(lines)
    return "\n\n".join(lines)


def spam(rng: random.Random) -> str:
    words = rng.sample(["cheap", "best", "online", "casino", "loans", "free", "win", "money", "pills", "fast"], 4)
    return " ".join(rng.choice(words) for _ in range(300))


def gibberish(rng: random.Random) -> str:
    return " ".join("".join(rng.choice("qxzjkvwfhb") for _ in range(rng.randint(2, 14))) for _ in range(200))


def build(out: Path, rng: random.Random) -> dict[str, list[str]]:
    """Writes one JSONL source per language plus a folder of binary files; returns kind -> planted ids."""
    planted: dict[str, list[str]] = {k: [] for k in ("chrome", "promo", "spam", "pasted", "exact", "near",
                                                     "partial", "gibberish", "binary")}
    for lang in LANGS:
        docs = [json.loads(line)["text"] for line in (ROOT / f"tests/fixtures/prose/{lang}.jsonl").open()]
        rows: list[str] = []

        def add(text: str, kind: str | None = None) -> None:
            rows.append(text)
            if kind:
                planted[kind].append(f"{lang}/{lang}.jsonl:{len(rows)}")

        for i, doc in enumerate(docs):
            add(f"{NAV}\n\n{doc}\n\n{COOKIE}\n{FOOTER}" if i % 4 == 0 else doc, "chrome" if i % 4 == 0 else None)
        for _ in range(3):
            add(promo(rng), "promo")
            add(spam(rng), "spam")
            add(gibberish(rng), "gibberish")
            add("\n\n".join([rng.choice(docs).split("\n\n")[0]] * 12), "pasted")
            add(rng.choice(docs), "exact")
            words = rng.choice(docs).split(" ")
            for j in rng.sample(range(len(words)), max(1, len(words) // 50)):
                words[j] = words[j].upper()
            add(" ".join(words) + "\n\nGeändert am 1. März.", "near")
            source = rng.choice(docs).split("\n\n")
            add("\n\n".join(source[: max(2, int(0.9 * len(source)))]) + "\n\n" + " ".join(
                rng.choice(doc.split()) for _ in range(25)), "partial")
        (out / f"{lang}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in rows), encoding="utf-8")
    (out / "bin").mkdir()  # binary files among real pages (a source that is all binary is a config error)
    for i, line in enumerate((ROOT / "tests/fixtures/prose/nl.jsonl").open()):
        (out / "bin" / f"page{i}.txt").write_text(json.loads(line)["text"], encoding="utf-8")
    for i in range(5):
        (out / "bin" / f"blob{i}.txt").write_bytes(bytes(rng.randrange(256) for _ in range(4000)))
        planted["binary"].append(f"bin/blob{i}.txt")
    return planted


CONFIG = """[run]
workdir = "work"
[data]
min_chars = 200
val_fraction = 0
workers = 2
{sources}
[tokenizer]
vocab_size = 300
[model]
n_layer = 1
d_model = 16
n_head = 2
seq_len = 16
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=str(ROOT / "src"), help="the scratchlm source tree to run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="planted-"))
    planted = build(work, random.Random(args.seed))
    sources = "".join(f'[[data.sources]]\nname = "{lang}"\ndomain = "docs"\npath = "{lang}.jsonl"\n'
                      f'languages = ["{lang}"]\n' for lang in LANGS)
    sources += '[[data.sources]]\nname = "bin"\ndomain = "docs"\npath = "bin"\nformat = "text"\nlanguages = ["nl"]\n'
    (work / "c.toml").write_text(CONFIG.format(sources=sources))
    env = {**os.environ, "PYTHONPATH": args.src}
    subprocess.run([sys.executable, "-m", "scratchlm", "data", "prepare", "-c", str(work / "c.toml")], env=env,
                   check=True, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sys.path.insert(0, args.src)
    from scratchlm.data.jsonl import read_jsonl

    data = next(p for p in (work / "work" / "data").iterdir() if p.name != "cache")
    kept = {d["id"]: d["text"] for f in (data / "train").glob("*.zst") for d in read_jsonl(f)}
    rules = Counter()
    for f in data.glob("rejected-*.jsonl.zst"):
        for r in read_jsonl(f):
            if r.get("level", "document") == "document":
                rules[r["rule"]] += 1
    print("| kind | planted | removed | share |\n|---|---:|---:|---:|")
    total = removed_total = 0
    for kind, ids in planted.items():
        if kind == "chrome":  # the page stays; its three chrome lines must go
            removed = sum(all(x not in kept.get(i, "") for x in (NAV, COOKIE, FOOTER)) and i in kept for i in ids)
        else:
            removed = sum(i not in kept for i in ids)
        total += len(ids)
        removed_total += removed
        print(f"| {kind} | {len(ids)} | {removed} | {removed / len(ids):.0%} |")
    print(f"| all | {total} | {removed_total} | {removed_total / total:.0%} |")
    real = [(f"{lang}/{lang}.jsonl:{i + 1}", json.loads(line)["text"])
            for lang in LANGS for i, line in enumerate((ROOT / f"tests/fixtures/prose/{lang}.jsonl").open())]
    kept_chars = sum(min(len(kept.get(i, "")), len(t)) for i, t in real)
    print(f"\nreal prose pages kept: {sum(i in kept for i, _ in real)}/{len(real)}, characters kept: "
          f"{kept_chars / sum(len(t) for _, t in real):.1%}\ndocument rules: {dict(rules.most_common())}")


if __name__ == "__main__":
    main()
