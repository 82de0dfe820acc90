"""A fake data-stage output (train files, validation split, stats.json) and a config, for the tokenizer tests."""
from __future__ import annotations

from pathlib import Path

from scratchlm.config import config_from_dict
from scratchlm.data.jsonl import write_jsonl
from scratchlm.ids import write_json

EN = "The committee will meet again next week to discuss the budget and the new hiring plan for the team. "
DE = "Der Ausschuss trifft sich nächste Woche erneut, um den Haushalt und den neuen Einstellungsplan zu besprechen. "
ES = "El comité se reunirá la próxima semana para hablar del presupuesto y del nuevo plan de contratación. "
CODE = "def total(items):\n    return sum(item.price for item in items)\n"


def fake_data(directory: Path, train: dict[str, list[dict]], val: list[dict]) -> Path:
    (directory / "train").mkdir()
    (directory / "val").mkdir()
    stats = {"sources": {}, "train_files": {}}
    for name, docs in train.items():
        write_jsonl(directory / "train" / f"{name}.jsonl", docs)
        stats["train_files"][name] = [f"{name}.jsonl"]
        stats["sources"][name] = {"train": {"docs": len(docs), "chars": sum(len(d["text"]) for d in docs)}}
    write_jsonl(directory / "val" / "prose.jsonl", val)
    write_json(directory / "stats.json", stats)
    return directory


def tokenizer_cfg(sources: list[dict], data: dict | None = None, **tokenizer):
    return config_from_dict({"data": {"sources": sources, **(data or {})},
                             "tokenizer": {"vocab_size": 300, **tokenizer}})
