"""Human evaluation: a rating sheet of prompts and outputs, scored by a person against documented criteria.

`scratchlm eval human` writes the sheet (JSON, or CSV for a spreadsheet) into the checkpoint's evals folder;
`scratchlm eval rate SHEET` walks a person through it in the terminal, saving after every item so a rating
session can stop and resume. Automatic metrics miss what people notice first (a promotional tone, a confident
wrong answer); the scores sit beside them in the checkpoint's report, with the date and the checkpoint.

CSV layout: columns id, prompt, output, one per criterion ("fluent (1-5)"), note, checkpoint, checkpoint_id,
created; the first row after the header (id `#criteria`) holds each criterion's definition.
"""
from __future__ import annotations

import csv
import io
import json
import time
from itertools import cycle, islice, zip_longest
from pathlib import Path
from typing import Callable

from ..atomic import atomic_write_text
from ..config import Config
from ..data.jsonl import read_jsonl
from ..errors import UserError
from ..ids import read_json
from ..model.checkpoint import load_model
from ..model.complete import complete_text
from ..pipeline import Artifact
from ..rating import ask_answer
from .samples import DEFAULT_PROMPT_CHARS
from .store import checkpoint_id, evals_dir

CRITERIA_ROW = "#criteria"


def parse_criteria(lines: list[str]) -> list[dict]:
    out = []
    for line in lines:
        name, _, description = line.partition(":")
        if not name.strip() or "," in name:
            raise UserError(f"`eval.suite.human_criteria` entry {line!r}: write it as `name: what it means`")
        out.append({"name": name.strip(), "description": description.strip()})
    return out


def sheet_prompts(cfg: Config, art: dict[str, Artifact], meta: dict, n: int) -> list[str]:
    """The config's prompts, the training prompts, then openings of validation documents, domain by domain."""
    prompts = list(dict.fromkeys([*cfg.eval.prompts, *meta.get("prompts", [])]))
    data = art["data"].dir
    openings = [[d["text"][:DEFAULT_PROMPT_CHARS].rsplit(" ", 1)[0] for d in read_jsonl(path)]
                for path in sorted((data / "val").glob("*.jsonl"))]
    for group in zip_longest(*openings):
        if len(prompts) >= n:
            break
        prompts.extend(p for p in group if p and p not in prompts)
    if not prompts:
        raise UserError("no prompts for the rating sheet: set `eval.prompts` or run `scratchlm data prepare`")
    return list(islice(cycle(prompts), n))


def write_sheet(cfg: Config, art: dict[str, Artifact], checkpoint: Path, n: int, out: Path | None = None, fmt: str = "json") -> Path:
    model, tokenizer, meta = load_model(checkpoint)
    e = cfg.eval
    criteria = parse_criteria(e.suite.human_criteria)
    items = []
    for i, prompt in enumerate(sheet_prompts(cfg, art, meta, n)):
        output = complete_text(model, tokenizer, prompt, e.max_new_tokens, temperature=e.temperature,
                               top_k=e.top_k, seed=cfg.train.seed + 7919 * i)
        items.append({"id": i + 1, "prompt": prompt, "output": output,
                      "scores": {c["name"]: None for c in criteria}, "note": ""})
    sheet = {"checkpoint": str(Path(checkpoint).resolve()), "checkpoint_id": checkpoint_id(checkpoint),
             "step": meta["step"], "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "rated": None,
             "scale": [1, e.suite.human_scale], "criteria": criteria, "items": items}
    if out is None:
        out = evals_dir(checkpoint) / f"human-{time.strftime('%Y%m%d-%H%M%S')}.{fmt}"
    out.parent.mkdir(parents=True, exist_ok=True)
    save_sheet(sheet, out)
    return out


def _score(value, where: str, top: int) -> int | None:
    if value in (None, ""):
        return None
    try:
        score = int(str(value).strip())
    except ValueError:
        raise UserError(f"{where}: score {value!r} is not a whole number") from None
    if not 1 <= score <= top:
        raise UserError(f"{where}: score {score} is outside 1..{top}")
    return score


def load_sheet(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"rating sheet {path} not found")
    sheet = _read_csv(path) if path.suffix == ".csv" else _read_json_sheet(path)
    top = sheet["scale"][1]
    for item in sheet["items"]:
        for name, value in item["scores"].items():
            item["scores"][name] = _score(value, f"{path} item {item['id']} criterion `{name}`", top)
    return sheet


def _read_json_sheet(path: Path) -> dict:
    try:
        sheet = read_json(path)
        assert {"criteria", "items", "scale"} <= set(sheet)
    except (ValueError, AssertionError, TypeError):
        raise UserError(f"{path}: not a scratchlm rating sheet") from None
    return sheet


def _read_csv(path: Path) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or rows[0].get("id") != CRITERIA_ROW:
        raise UserError(f"{path}: not a scratchlm rating sheet (no `{CRITERIA_ROW}` row)")
    head, rows = rows[0], rows[1:]
    columns = [c for c in head if c not in ("id", "prompt", "output", "note", "checkpoint", "checkpoint_id",
                                            "created", "rated", "step")]
    top = int(columns[0].rsplit("-", 1)[1].rstrip(")")) if columns else 5
    criteria = [{"name": c.rsplit(" (", 1)[0], "description": head[c]} for c in columns]
    items = [{"id": int(r["id"]), "prompt": r["prompt"], "output": r["output"], "note": r.get("note") or "",
              "scores": {c.rsplit(" (", 1)[0]: r[c] for c in columns}} for r in rows]
    return {"checkpoint": head["checkpoint"], "checkpoint_id": head["checkpoint_id"], "created": head["created"],
            "rated": head.get("rated") or None, "step": int(head["step"]), "scale": [1, top],
            "criteria": criteria, "items": items}


def save_sheet(sheet: dict, path: Path) -> None:
    if path.suffix != ".csv":
        atomic_write_text(path, json.dumps(sheet, indent=2, ensure_ascii=False) + "\n")
        return
    top = sheet["scale"][1]
    cols = [f"{c['name']} (1-{top})" for c in sheet["criteria"]]
    header = ["id", "prompt", "output", *cols, "note", "checkpoint", "checkpoint_id", "created", "rated", "step"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerow([CRITERIA_ROW, "", "", *(c["description"] for c in sheet["criteria"]), "", sheet["checkpoint"],
                sheet["checkpoint_id"], sheet["created"], sheet.get("rated") or "", sheet["step"]])
    for it in sheet["items"]:
        scores = [it["scores"].get(c["name"]) for c in sheet["criteria"]]
        w.writerow([it["id"], it["prompt"], it["output"], *("" if s is None else s for s in scores), it["note"],
                    "", "", "", "", ""])
    atomic_write_text(path, buf.getvalue())


def rate_sheet(path: Path, ask: Callable[[str], str] = input, say: Callable[[str], None] = print) -> dict:
    """Ask for every missing score; `s` skips an item, `q` stops (progress is saved after each item)."""
    path = Path(path)
    sheet = load_sheet(path)
    top = sheet["scale"][1]
    say(f"Rating {len(sheet['items'])} outputs of checkpoint {sheet['checkpoint_id']} (step {sheet['step']}), "
        f"each criterion 1..{top}:")
    for c in sheet["criteria"]:
        say(f"  {c['name']}: {c['description']}")
    for item in sheet["items"]:
        todo = [c["name"] for c in sheet["criteria"] if item["scores"].get(c["name"]) is None]
        if not todo:
            continue
        say(f"\n--- item {item['id']} / {len(sheet['items'])} ---\nPROMPT: {item['prompt']}\nOUTPUT: {item['output']}")
        for name in todo:
            answer = _ask_score(ask, f"{name} (1-{top}, s=skip item, q=quit): ", top, say)
            if answer == "q":
                save_sheet(sheet, path)
                say(f"saved {path}; run `scratchlm eval rate {path}` again to continue")
                return sheet
            if answer == "s":
                break
            item["scores"][name] = answer
        sheet["rated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        save_sheet(sheet, path)
    say(f"saved {path}")
    return sheet


def _ask_score(ask, prompt: str, top: int, say) -> int | str:
    def parse(raw: str) -> int | None:
        return int(raw) if raw.isdigit() and 1 <= int(raw) <= top else None

    return ask_answer(ask, prompt, parse, say, f"  please answer a whole number 1..{top}, s or q")


def summarize_sheet(sheet: dict) -> dict:
    per = {}
    for c in sheet["criteria"]:
        scores = [it["scores"][c["name"]] for it in sheet["items"] if it["scores"].get(c["name"]) is not None]
        per[c["name"]] = {"mean": sum(scores) / len(scores) if scores else None, "rated": len(scores)}
    return {"checkpoint_id": sheet["checkpoint_id"], "step": sheet["step"], "created": sheet["created"],
            "rated": sheet.get("rated"), "items": len(sheet["items"]), "scale": sheet["scale"], "criteria": per}
