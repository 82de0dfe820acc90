"""Prepare data: read every source, clean, deduplicate, and split validation off per domain.

Order matters. The validation split is drawn from the *cleaned, deduplicated* corpus, so validation and
training come from the same distribution and no validation document has an exact copy in training.

Pass 1 streams every source through the cleaning steps into per-source shards. Pass 2 draws validation
documents per domain (by a seeded hash of the document ID, so the draw is random but reproducible and does not
depend on file order) and writes the train shards and the per-domain validation files.
"""
from __future__ import annotations

import shutil
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from ..config import Config
from ..ids import write_json
from ..progress import bar, log
from .jsonl import ShardWriter, read_jsonl, write_jsonl
from .ledger import Ledger
from .readers import Rejected, iter_source


@dataclass
class SourceStats:
    docs_in: int = 0
    chars_in: int = 0
    docs_kept: int = 0
    chars_kept: int = 0
    dropped: Counter = field(default_factory=Counter)


def _normalized_hash(text: str) -> int:
    return xxhash.xxh3_64_intdigest(" ".join(text.split()).lower().encode())


def _val_rank(doc_id: str, seed: int) -> int:
    return xxhash.xxh3_64_intdigest(doc_id.encode(), seed=seed)


def prepare_data(cfg: Config, out: Path) -> dict:
    d = cfg.data
    ledger = Ledger(out)
    stats: dict[str, SourceStats] = {}
    seen: set[int] = set()  # 8 bytes per kept document: fine up to hundreds of millions of documents
    ranks: dict[str, list[tuple[int, str]]] = defaultdict(list)  # domain -> (rank, doc id)
    staging = out / "staging"
    pass1: dict[str, list[Path]] = {}

    for src in d.sources:
        st = stats[src.name] = SourceStats()
        with ShardWriter(staging, src.name, d.shard_docs) as writer:
            for item in bar(iter_source(src, cfg.base_dir), desc=f"prepare {src.name}", unit="doc"):
                st.docs_in += 1
                if isinstance(item, Rejected):
                    st.dropped[item.rule] += 1
                    ledger.reject(source=src.name, doc_id=item.id, stage="read", rule=item.rule, detail=item.detail)
                    continue
                text = unicodedata.normalize(d.normalization, item["text"]).strip()
                st.chars_in += len(item["text"])
                rule = None
                if len(text) < d.min_chars:
                    rule, detail = "too_short", f"{len(text)} < {d.min_chars} chars"
                elif len(text) > d.max_chars:
                    rule, detail = "too_long", f"{len(text)} > {d.max_chars} chars"
                else:
                    h = _normalized_hash(text)
                    if h in seen:
                        rule, detail = "exact_duplicate", "same normalized text as an earlier document"
                    seen.add(h)
                if rule:
                    st.dropped[rule] += 1
                    ledger.reject(source=src.name, doc_id=item["id"], stage="filter", rule=rule, detail=detail,
                                  text=text)
                    continue
                item["text"] = text
                st.docs_kept += 1
                st.chars_kept += len(text)
                ranks[src.domain].append((_val_rank(item["id"], d.seed), item["id"]))
                writer.write(item)
            pass1[src.name] = writer.paths

    val_ids, val_plan = _draw_validation(cfg, ranks)
    ranks.clear()
    val_docs: dict[str, list[dict]] = defaultdict(list)
    train_files: dict[str, list[str]] = {}
    train_stats: dict[str, dict] = {}
    for src in d.sources:
        docs = chars = 0
        with ShardWriter(out / "train", src.name, d.shard_docs) as writer:
            for path in pass1[src.name]:
                for doc in read_jsonl(path):
                    if doc["id"] in val_ids:
                        val_docs[doc["domain"]].append(doc)
                    else:
                        writer.write(doc)
                        docs += 1
                        chars += len(doc["text"])
            train_files[src.name] = [p.name for p in writer.paths]
        train_stats[src.name] = {"docs": docs, "chars": chars}
    shutil.rmtree(staging, ignore_errors=True)

    (out / "val").mkdir(exist_ok=True)
    val_summary = {}
    for domain, docs in sorted(val_docs.items()):
        write_jsonl(out / "val" / f"{domain}.jsonl", docs)
        val_summary[domain] = {"docs": len(docs), "chars": sum(len(x["text"]) for x in docs)}
    ledger.close()

    manifest = {
        "sources": {name: {"domain": next(s.domain for s in d.sources if s.name == name),
                           "docs_in": s.docs_in, "chars_in": s.chars_in, "docs_kept": s.docs_kept,
                           "chars_kept": s.chars_kept, "dropped": dict(s.dropped),
                           "train": train_stats[name]} for name, s in stats.items()},
        "validation": val_summary,
        "validation_plan": val_plan,
        "train_files": train_files,
    }
    write_json(out / "stats.json", manifest)
    total_in = sum(s.docs_in for s in stats.values())
    total_kept = sum(s.docs_kept for s in stats.values())
    log(f"data: {total_in} documents in, {total_kept} kept, "
        f"{sum(v['docs'] for v in val_summary.values())} held out for validation")
    return manifest


def _draw_validation(cfg: Config, ranks: dict[str, list[tuple[int, str]]]) -> tuple[set[str], dict]:
    d = cfg.data
    chosen: set[str] = set()
    plan = {}
    for domain, items in ranks.items():
        n = len(items)
        want = min(d.val_max_docs, max(d.val_min_docs, round(n * d.val_fraction)))
        if d.val_fraction == 0 or n < 2 * d.val_min_docs:
            want = 0  # too few documents: holding some out would leave training nearly empty
        items.sort()
        chosen.update(doc_id for _, doc_id in items[:want])
        plan[domain] = {"clean_docs": n, "held_out": want,
                        "note": "" if want else f"only {n} clean documents; no validation split for this domain"}
    return chosen, plan
