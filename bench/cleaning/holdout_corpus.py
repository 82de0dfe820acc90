"""The holdout corpus of the cleaning benchmark: Debian documentation packages that are NOT in corpus.py, to check
the rules on text they were not tuned on, run with scratchlm's defaults.

Sources (one scratchlm source per genre and language):
  man-nl/pt/cs/uk/ja        man pages rendered as corpus.py does (manpages-nl, -pt-br, -cs, -uk, -ja)
  devref-en/de/ru/ja        the Debian Developer's Reference, HTML (one file per chapter; not the one-page copy)
  handbook-pt/ja            the Debian Administrator's Handbook, HTML (pt-BR, ja-JP)
  gitdoc-en                 git's HTML manual pages and guides (git-doc)
  code                      50 shell scripts from /usr/bin and 50 Python modules from python3 dist-packages

A source over its cap (150 files) takes an evenly spaced subset of its sorted file list. Deterministic for given
package versions; the code source depends on what the machine has installed in /usr/bin and dist-packages.
The config sets no `profile` (the defaults are what this corpus tests: `auto` for the documentation, `code` for
domain "code"), only each source's `languages`.
"""
from __future__ import annotations

from pathlib import Path

from . import corpus
from .corpus import copy_files, evenly, man_pages, write_man_pages

ROOT = Path("/work/bench-holdout")  # default --root
LABELS = Path(__file__).resolve().parents[1] / "cleaning_holdout_labels.jsonl"
BEFORE_COMMIT = "80d4d67"  # the "before" system: profile defaulted to prose, no auto profile
CAP = 150
CODE_CAP = 50  # shell scripts, and Python modules
PACKAGES = ["man-db", "groff-base", "bsdextrautils", "manpages-nl", "manpages-pt-br", "manpages-cs", "manpages-uk",
            "manpages-ja", "developers-reference", "developers-reference-de", "developers-reference-ru",
            "developers-reference-ja", "debian-handbook", "git-doc"]
MAN = {"man-nl": ("nl", "manpages-nl", "nl"), "man-pt": ("pt", "manpages-pt-br", "pt_BR"),
       "man-cs": ("cs", "manpages-cs", "cs"), "man-uk": ("uk", "manpages-uk", "uk"),
       "man-ja": ("ja", "manpages-ja", "ja")}  # source -> (language, package, man folder)
DEVREF_DIR = Path("/usr/share/developers-reference")
DEVREF = {"devref-en": ("en", ""), "devref-de": ("de", "de"), "devref-ru": ("ru", "ru"), "devref-ja": ("ja", "ja")}
HANDBOOK_DIR = Path("/usr/share/doc/debian-handbook/html")
HANDBOOK = {"handbook-pt": ("pt", "pt-BR"), "handbook-ja": ("ja", "ja-JP")}
GITDOC_DIR = Path("/usr/share/doc/git-doc")
SHEBANGS = (b"#!/bin/sh", b"#!/bin/bash", b"#! /bin/sh", b"#!/usr/bin/env bash")
DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")

# (source name, genre = scratchlm domain, language, format)
SOURCES = ([(n, "manpages", v[0], "text") for n, v in MAN.items()]
           + [(n, "manual", v[0], "html") for n, v in DEVREF.items()]
           + [(n, "manual", v[0], "html") for n, v in HANDBOOK.items()]
           + [("gitdoc-en", "manual", "en", "html"), ("code", "code", "en", "text")])


def code_files() -> list[tuple[Path, str]]:
    """(path, corpus file name) of the code source: shell scripts of /usr/bin, Python modules over 500 bytes."""
    shell = []
    for p in sorted(Path("/usr/bin").iterdir()):
        if p.is_file() and not p.is_symlink():
            try:
                head = p.read_bytes()[:64]
            except OSError:
                continue
            if head.startswith(SHEBANGS):
                shell.append(p)
    py = [p for p in sorted(DIST_PACKAGES.rglob("*.py")) if "sandbox" not in str(p) and p.stat().st_size > 500]
    return ([(p, "bin__" + p.name + ".sh") for p in evenly(shell, CODE_CAP)]
            + [(p, "py__" + "__".join(p.relative_to(DIST_PACKAGES).parts)) for p in evenly(py, CODE_CAP)])


def _html(folder: Path, skip: str = "") -> list[tuple[Path, str]]:
    return [(p, p.name) for p in evenly([p for p in folder.glob("*.html") if p.name != skip], CAP)]


def _source_files(name: str, genre: str, lang: str, out: Path) -> tuple[list[str], dict]:
    if name in MAN:
        _, package, mandir = MAN[name]
        pages = man_pages([package], f"/usr/share/man/{mandir}/man")
        return write_man_pages(out, evenly(pages, CAP)), {"pages_not_stub": len(pages)}
    if name in DEVREF:  # developers-reference.html is the one-page copy of the chapters
        return copy_files(out, _html(DEVREF_DIR / DEVREF[name][1], skip="developers-reference.html")), {}
    if name in HANDBOOK or name == "gitdoc-en":
        folder = HANDBOOK_DIR / HANDBOOK[name][1] if name in HANDBOOK else GITDOC_DIR
        return copy_files(out, _html(folder)), {"html_files": len(list(folder.glob("*.html")))}
    return copy_files(out, code_files()), {}


def build(root: Path) -> dict:
    """Write root/corpus/<source>/... and root/corpus/manifest.json; returns the manifest."""
    corpus.install_packages(PACKAGES)
    return corpus.write_corpus(root, PACKAGES, SOURCES, _source_files)


def config_toml(root: Path, system: str) -> str:
    return corpus.config_toml(root, system, SOURCES, profile=None)
