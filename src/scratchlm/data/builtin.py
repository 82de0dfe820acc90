"""The built-in default corpus: real text nobody on the team wrote, built offline from this Python installation.

- code: the standard library's .py files
- docs: the documentation topics of `pydoc_data.topics`
- web:  the long descriptions of installed distributions (messy Markdown/reST with badges, links and many
        near-identical license paragraphs, which is what real scraped text looks like)

Deterministic for a given installation: files are visited in a fixed order and nothing random is drawn.
"""
from __future__ import annotations

import importlib.metadata
import json
import sysconfig
from pathlib import Path
from typing import Collection, Iterator

import xxhash

DOMAINS = ("code", "docs", "web")


def _stable_order(key: str) -> int:
    # Hash order mixes packages, so a character budget samples the whole stdlib rather than its first letters.
    return xxhash.xxh64_intdigest(key.encode())


def code_documents(max_chars: int | None = None) -> Iterator[dict]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [f for f in root.rglob("*.py") if "site-packages" not in f.relative_to(root).parts]
    files.sort(key=lambda f: (_stable_order(str(f.relative_to(root))), str(f)))
    used = 0
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a handful of stdlib test files are deliberately not UTF-8
        if max_chars is not None and used + len(text) > max_chars:
            continue
        used += len(text)
        yield {"id": f"stdlib/{f.relative_to(root).as_posix()}", "text": text}


def docs_documents() -> Iterator[dict]:
    from pydoc_data.topics import topics

    for name in sorted(topics):
        yield {"id": f"pydoc/{name}", "text": topics[name]}


def web_documents(skip: Collection[str] = ()) -> Iterator[dict]:
    """skip: distributions not to read (lower-case names); default none."""
    seen = set()
    dists = sorted(importlib.metadata.distributions(), key=lambda d: (d.metadata.get("Name") or "").lower())
    for dist in dists:
        name = dist.metadata.get("Name")
        if not name or name.lower() in seen or name.lower() in skip:
            continue
        seen.add(name.lower())
        text = dist.metadata.get("Description") or dist.metadata.get_payload() or ""
        if isinstance(text, str) and text.strip():
            yield {"id": f"pypi/{name}", "text": text}


def build_builtin_corpus(out: Path, code_max_chars: int | None = None,
                         web_skip: Collection[str] = ()) -> dict[str, Path]:
    """Write one JSONL file per domain into `out`; returns {domain: path}. web_skip: see web_documents."""
    out.mkdir(parents=True, exist_ok=True)
    makers = {"code": lambda: code_documents(code_max_chars), "docs": docs_documents,
              "web": lambda: web_documents(web_skip)}
    paths = {}
    for domain in DOMAINS:
        path = out / f"{domain}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for doc in makers[domain]():
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
        paths[domain] = path
    return paths
