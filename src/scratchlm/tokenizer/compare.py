"""`scratchlm tokenizer compare A.json B.json --text PATH...`: the fertility metrics of tokenizers, side by side.

Text is JSONL (`.jsonl`, `.jsonl.zst`; a line is a document with "text" and optionally "domain") or any other
file read as one plain-text document; a folder is read recursively. A document without a domain gets its
file's name. Each document's language is detected once, so every tokenizer is measured on the same labels, and
each gets the verdicts of the tokenizer stage's fertility report (the same function).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from ..config import TokenizerConfig
from ..data.jsonl import read_jsonl
from ..errors import UserError
from .bpe import load_tokenizer
from .fertility import document_language, languages_of_use, measure, verdicts

METRICS = ("tokens_per_word", "prose_tokens_per_word", "chars_per_token", "bytes_per_token")


def read_texts(paths: Iterable[str | Path]) -> Iterator[dict]:
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"--text {p}: no such file or folder")
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            stem = f.name.split(".")[0]
            if f.name.endswith((".jsonl", ".jsonl.zst")):
                for i, doc in enumerate(read_jsonl(f)):
                    if "text" not in doc:
                        raise UserError(f"{f}: line {i + 1} has no \"text\" field")
                    yield {"text": doc["text"], "domain": doc.get("domain") or stem}
            else:
                try:
                    yield {"text": f.read_text(encoding="utf-8"), "domain": stem}
                except UnicodeDecodeError:
                    raise UserError(f"{f}: not UTF-8 text") from None


def compare(tokenizer_paths: list[str | Path], text_paths: list[str | Path], code_domains=("code",),
            min_language_share: float = TokenizerConfig().min_language_share) -> tuple[list[dict], str]:
    docs = list(read_texts(text_paths))
    if not docs:
        raise UserError("--text: no documents found")
    for doc in docs:
        doc["lang"] = document_language(doc, code_domains)
    results = [measure(load_tokenizer(Path(p)), docs, code_domains) for p in tokenizer_paths]
    langs = [k for k in results[0]["languages"] if k == "code" or k in languages_of_use(results[0], min_language_share)]
    rows: list[list[str]] = [["vocabulary size"] + [f"{r['vocab']['size']:,}" for r in results],
                             ["vocabulary used"] + [f"{r['vocab']['used_share']:.1%}" for r in results],
                             ["tokens, all text"] + [f"{r['overall']['tokens']:,}" for r in results]]
    # Same documents, same labels: every result has the same domains and languages.
    scopes = [("all", [r["overall"] for r in results])]
    scopes += [(f"domain {d}", [r["domains"][d] for r in results]) for d in results[0]["domains"]]
    scopes += [(f"language {k}", [r["languages"][k] for r in results]) for k in langs]
    for scope, picked in scopes:
        for metric in METRICS:
            rows.append([f"{scope}: {metric.replace('_per_', '/').replace('_', ' ')}"]
                        + [_fmt(m[metric]) for m in picked])
    labels = [f"{chr(65 + i)}: {label}" for i, label in enumerate(column_labels(tokenizer_paths))]
    legend = [f"{chr(65 + i)} = {p}" for i, p in enumerate(tokenizer_paths)]
    judged = []
    for label, result in zip(labels, results):
        result["verdicts"] = verdicts(result, min_language_share)
        judged += ["", f"Verdicts, {label}:"] + [f"  [{v['level']}] {v['check']}: {v['message']}"
                                                 for v in result["verdicts"]]
    return results, "\n".join(legend + [f"{len(docs)} documents", "", _columns([["metric"] + labels] + rows)]
                              + judged)


def column_labels(paths: list[str | Path]) -> list[str]:
    """File names; where two are equal (every trained tokenizer is tokenizer.json), the parent directories,
    with as many levels as it takes to tell them apart."""
    resolved = [Path(p).resolve() for p in paths]
    names = [p.name for p in resolved]
    if len(set(names)) == len(names):
        return names
    parents = [p.parent.parts for p in resolved]
    for depth in range(1, max(map(len, parents)) + 1):
        labels = ["/".join(parts[-depth:]) for parts in parents]
        if len(set(labels)) == len(labels):
            return labels
    return [str(p) for p in resolved]  # the same file twice: nothing tells them apart


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _columns(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
