"""Template-leak check: chat markers inside the pretraining corpus.

If `<|user|>` or `<|assistant|>` (or another model's template: `<|im_start|>`, `[INST]`) occur in pretraining
text, the base model has already learned them in some unrelated context, the tokenizer maps them to the special
IDs the chat template relies on, and fine-tuning starts from a muddled prior. This scans the cleaned training
documents (`data/<id>/train`) and says where.
"""
from __future__ import annotations

from pathlib import Path

from ..data.jsonl import read_jsonl
from ..progress import bar
from ..tokenizer.bpe import BOS, CHAT_TOKENS, EOS

MARKERS = (*CHAT_TOKENS, BOS, EOS, "<|im_start|>", "<|im_end|>", "[INST]", "<start_of_turn>",
           "<|start_header_id|>")
MAX_LOCATIONS = 50


def scan_for_markers(data_dir: Path, markers: tuple[str, ...] = MARKERS) -> dict:
    counts = {m: 0 for m in markers}
    locations = []
    docs = 0
    files = sorted((Path(data_dir) / "train").glob("*.jsonl*"))
    for f in bar(files, desc="leak check", unit="file"):
        for line_no, doc in enumerate(read_jsonl(f), 1):
            docs += 1
            text = doc["text"]
            for m in markers:
                at = text.find(m)
                if at < 0:
                    continue
                counts[m] += text.count(m)
                if len(locations) < MAX_LOCATIONS:
                    locations.append({"file": f.name, "line": line_no, "offset": at, "marker": m,
                                      "source": doc.get("source"),
                                      "context": text[max(0, at - 40): at + len(m) + 40]})
    found = {m: n for m, n in counts.items() if n}
    return {"docs_scanned": docs, "files": len(files), "found": found, "locations": locations,
            "verdict": "warning" if found else "ok"}


def describe(leak: dict) -> str:
    if not leak["found"]:
        return f"leak check ok: no chat-template markers in {leak['docs_scanned']:,} training documents"
    where = "; ".join(f"{l['marker']} in {l['file']} line {l['line']}" for l in leak["locations"][:5])
    return (f"leak check WARNING: chat-template markers in the pretraining corpus "
            f"({', '.join(f'{m} x{n}' for m, n in leak['found'].items())}), e.g. {where}")
