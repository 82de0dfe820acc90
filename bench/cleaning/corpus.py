"""Build the real-text corpus of the cleaning benchmark from Debian documentation packages.

Sources (one scratchlm source per genre and language):
  man-en/de/fr/es/it/pl/ru         man pages rendered to plain text (man -l | col -bx, 80 columns, C.UTF-8)
  debref-en/de/fr/es/it            the Debian Reference, HTML (one file per chapter)
  pydoc-en                         the Python 3 library reference, HTML (python3-doc, library/*.html)

Everything is deterministic for given package versions: files are sorted and a source over its cap takes an
evenly spaced subset of the sorted list (not the first N, which would be all "a*" pages).
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

ROOT = Path("/work/bench-cleaning")  # default --root
LABELS = Path(__file__).resolve().parents[1] / "cleaning_labels.jsonl"
BEFORE_COMMIT = "5ab84ff"  # the "before" system: scratchlm at this commit (git archive)
PACKAGES = ["man-db", "groff-base", "bsdextrautils", "manpages", "manpages-dev", "manpages-de", "manpages-fr",
            "manpages-es", "manpages-it", "manpages-pl", "manpages-ru", "debian-reference-en",
            "debian-reference-de", "debian-reference-fr",
            "debian-reference-es", "debian-reference-it", "python3-doc"]
MAN_CAP = 250
PYDOC_CAP = 300
MAN_PACKAGES = {"en": ["manpages", "manpages-dev"], "de": ["manpages-de"], "fr": ["manpages-fr"],
                "es": ["manpages-es"], "it": ["manpages-it"], "pl": ["manpages-pl"], "ru": ["manpages-ru"]}
DEBREF_LANGS = ["en", "de", "fr", "es", "it"]
DEBREF_DIR = Path("/usr/share/debian-reference")
PYDOC_DIR = Path("/usr/share/doc/python3-doc/html/library")

# (source name, genre, language, format)
SOURCES = ([(f"man-{lang}", "manpages", lang, "text") for lang in MAN_PACKAGES]
           + [(f"debref-{lang}", "manual", lang, "html") for lang in DEBREF_LANGS]
           + [("pydoc-en", "manual", "en", "html")])

ENV = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0",
       "MANPAGER": "cat", "PAGER": "cat"}


def install_packages(packages: list[str] = PACKAGES) -> None:
    missing = [p for p in packages
               if subprocess.run(["dpkg-query", "-W", "-f", "${Status}", p], capture_output=True,
                                 text=True).stdout.strip() != "install ok installed"]
    if not missing:
        return
    print(f"installing {' '.join(missing)}", flush=True)
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def package_versions(packages: list[str] = PACKAGES) -> dict[str, str]:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n", *packages], capture_output=True,
                         text=True).stdout
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def evenly(items: list, cap: int) -> list:
    items = sorted(items)
    if len(items) <= cap:
        return items
    return [items[(i * len(items)) // cap] for i in range(cap)]


def _is_stub(path: Path) -> bool:
    """A man page that is only a `.so other-page` link (rendering it would duplicate the target)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return True
    lines = [line for line in head.splitlines() if line.strip() and not line.startswith(('.\\"', "'\\\""))]
    return len(lines) <= 2 and any(line.startswith(".so ") for line in lines)


def man_files(lang: str) -> list[Path]:
    return man_pages(MAN_PACKAGES[lang], "/usr/share/man/man" if lang == "en" else f"/usr/share/man/{lang}/man")


def man_pages(packages: list[str], want: str) -> list[Path]:
    """The man pages of packages under the folder prefix want, without links and `.so` stubs, sorted."""
    out = subprocess.run(["dpkg-query", "-L", *packages], capture_output=True, text=True).stdout
    files = [Path(p) for p in out.splitlines() if p.startswith(want) and p.endswith(".gz") and Path(p).is_file()
             and not Path(p).is_symlink()]
    return [p for p in sorted(files) if not _is_stub(p)]


def render_man(path: Path) -> str:
    man = subprocess.run(["man", "-l", str(path)], capture_output=True, env=ENV, timeout=120)
    col = subprocess.run(["col", "-bx"], input=man.stdout, capture_output=True, env=ENV, timeout=60)
    return col.stdout.decode("utf-8", errors="replace")


def write_man_pages(out: Path, picks: list[Path]) -> list[str]:
    """Render picks into out/<page>.txt (pages that render empty are left out); returns the file names."""
    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(render_man, picks))
    files = []
    for path, text in zip(picks, texts):
        if text.strip():
            dst = out / (path.name[: -len(".gz")] + ".txt")
            dst.write_text(text, encoding="utf-8")
            files.append(dst.name)
    return files


def copy_files(out: Path, pairs: list[tuple[Path, str]]) -> list[str]:
    """Copy each (path, name) to out/name; returns the names."""
    for path, name in pairs:
        shutil.copyfile(path, out / name)
    return [name for _, name in pairs]


def write_corpus(root: Path, packages: list[str], sources: list[tuple],
                 files_of: Callable[[str, str, str, Path], tuple[list[str], dict]]) -> dict:
    """Write root/corpus/<source>/ with files_of(name, genre, language, folder) -> (file names, manifest extras)
    for every source, and root/corpus/manifest.json; returns the manifest."""
    corpus = root / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    manifest = {"packages": package_versions(packages), "sources": {}}
    for name, genre, lang, fmt in sources:
        out = corpus / name
        out.mkdir(parents=True)
        files, extra = files_of(name, genre, lang, out)
        size = sum((out / f).stat().st_size for f in files)
        manifest["sources"][name] = {"genre": genre, "language": lang, "format": fmt, "files": len(files),
                                     "bytes": size, **extra}
        print(f"{name}: {len(files)} files, {size / 1e6:.2f} MB", flush=True)
    (corpus / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _source_files(name: str, genre: str, lang: str, out: Path) -> tuple[list[str], dict]:
    if genre == "manpages":
        return write_man_pages(out, evenly(man_files(lang), MAN_CAP)), {}
    if name.startswith("debref"):
        return copy_files(out, [(p, p.name.replace(f".{lang}.html", ".html"))
                                for p in sorted(DEBREF_DIR.glob(f"*.{lang}.html"))]), {}
    return copy_files(out, [(p, p.name) for p in evenly(list(PYDOC_DIR.glob("*.html")), PYDOC_CAP)]), {}


def build(root: Path) -> dict:
    """Write root/corpus/<source>/... and root/corpus/manifest.json; returns the manifest."""
    install_packages()
    return write_corpus(root, PACKAGES, SOURCES, _source_files)


def config_toml(root: Path, system: str, sources: list[tuple] = SOURCES, profile: str | None = "technical") -> str:
    """The scratchlm config of one system: every source with its language, and profile unless it is None."""
    lines = ["[run]", f'workdir = "{root / "runs" / system / "work"}"', "", "[data]", 'languages = ["en"]', ""]
    for name, genre, lang, fmt in sources:
        lines += ["[[data.sources]]", f'name = "{name}"', f'domain = "{genre}"',
                  f'path = "{root / "corpus" / name}"', f'format = "{fmt}"']
        lines += [f'profile = "{profile}"'] if profile else []
        lines += [f'languages = ["{lang}"]', ""]
    return "\n".join(lines)
