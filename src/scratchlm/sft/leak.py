"""Template-leak check: chat markers inside the pretraining corpus.

If `<|user|>` or `<|assistant|>` (or another model's template: `<|im_start|>`, `[INST]`) occur in pretraining
text, the base model has already seen them in some unrelated context, and fine-tuning starts from a muddled
prior. The data stage finds them where they enter and records the result in its stats.json (data/marker_scan.py:
one list, one scan); this reads that result, and scans the prepared documents itself only for a data directory
prepared before the scan existed.
"""
from __future__ import annotations

from pathlib import Path

from ..data.marker_scan import describe as describe_markers
from ..data.marker_scan import scan_data_dir
from ..ids import read_json


def scan_for_markers(data_dir: Path) -> dict:
    stats = Path(data_dir) / "stats.json"
    recorded = read_json(stats).get("template_markers") if stats.exists() else None
    return recorded if recorded is not None else scan_data_dir(data_dir)


def describe(leak: dict) -> str:
    return "leak check " + ("WARNING: " if leak["found"] else "ok: ") + describe_markers(leak)
