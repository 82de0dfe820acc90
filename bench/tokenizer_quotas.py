"""Build a small real corpus on which the tokenizer's sample quotas and per-language verdicts can be checked
(issue 37, parts 3 and 4): Debian documentation nobody on the team wrote, with code as most of the corpus.

    python bench/tokenizer_quotas.py OUT [--seed N]   # writes OUT/corpus/... and OUT/scratchlm.toml
    scratchlm data prepare -c OUT/scratchlm.toml && scratchlm data decontaminate -c OUT/scratchlm.toml
    scratchlm tokenizer train -c OUT/scratchlm.toml && scratchlm check -c OUT/scratchlm.toml

Sources: the Debian Reference in English and Spanish (HTML, chapters 1-4), Spanish man pages and a few German
ones (rendered with `man -l FILE | col -bx`), and the `.py` files of packages in this venv as code, sized so code
is ~3/4 of the corpus against a 10% quota (domain weights: code 0.2, guide 0.9, man 0.9). The corpus is far below
the default `tokenizer.sample_chars`, so every document fits in the sample's budget: the case the issue describes.
`data.languages` keeps en, es and de; German is a small share of the corpus, and whether the validation split
holds any of it depends on `data.seed` (--seed): 4 holds none, 1 one short page.
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REFERENCE = Path("/usr/share/debian-reference")
CHAPTERS = ("ch01", "ch02", "ch03", "ch04")
MAN_ES = 35  # pages, in name order, of /usr/share/man/es/man1
MAN_DE = 12  # of /usr/share/man/de/man1: a small German source
CODE_PACKAGES = ("click", "fsspec", "datasketch", "attr", "dateutil", "idna", "anyio", "h11")
CODE_CHARS = 2_700_000

CONFIG = """[data]
languages = ["en", "es", "de"]
seed = {seed}

[model]
preset = "tiny"  # `scratchlm check` probes a training step: keep it cheap

[tokenizer]
vocab_size = 4096

[[data.sources]]
name = "guide_en"
domain = "guide"
path = "corpus/guide_en"
format = "html"
weight = 0.45

[[data.sources]]
name = "guide_es"
domain = "guide"
path = "corpus/guide_es"
format = "html"
weight = 0.45

[[data.sources]]
name = "man_es"
domain = "man"
path = "corpus/man_es"
format = "text"
weight = 0.8

[[data.sources]]
name = "man_de"
domain = "man"
path = "corpus/man_de"
format = "text"
weight = 0.1

[[data.sources]]
name = "code"
domain = "code"
path = "corpus/code"
format = "text"
weight = 0.2
"""


def render_man(page: Path) -> str:
    man = subprocess.run(["man", "-l", str(page)], capture_output=True, env={"MANWIDTH": "80", "LANG": "C.UTF-8"})
    return subprocess.run(["col", "-bx"], input=man.stdout, capture_output=True).stdout.decode("utf-8", "replace")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=1234, help="data.seed: which documents are held out")
    args = ap.parse_args()
    out = args.out
    corpus = out / "corpus"
    for lang in ("en", "es"):
        (corpus / f"guide_{lang}").mkdir(parents=True, exist_ok=True)
        for ch in CHAPTERS:
            shutil.copy(REFERENCE / f"{ch}.{lang}.html", corpus / f"guide_{lang}" / f"{ch}.html")
    for lang, n in (("es", MAN_ES), ("de", MAN_DE)):
        (corpus / f"man_{lang}").mkdir(parents=True, exist_ok=True)
        for page in sorted(Path(f"/usr/share/man/{lang}/man1").glob("*.1.gz"))[:n]:
            text = render_man(page)
            if text.strip():
                (corpus / f"man_{lang}" / f"{page.name.removesuffix('.1.gz')}.txt").write_text(text)
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (corpus / "code").mkdir(parents=True, exist_ok=True)
    total = 0
    for package in CODE_PACKAGES:
        for f in sorted((site / package).rglob("*.py")):
            if total >= CODE_CHARS:
                break
            text = f.read_text(encoding="utf-8", errors="replace")
            name = f.relative_to(site / package).as_posix().replace("/", "_")
            (corpus / "code" / f"{package}_{name}").write_text(text)
            total += len(text)
    (out / "scratchlm.toml").write_text(CONFIG.format(seed=args.seed))
    print(f"{out / 'scratchlm.toml'}: code {total:,} chars")


if __name__ == "__main__":
    main()
