"""The audit sheet: a sample of the prepare stage's decisions for a person to label right or wrong.

`scratchlm data audit` samples, per source and rule, an evenly spread set of the ledger's records (documents
dropped, lines and paragraphs cut) and, under the pseudo-rule `kept`, of the documents that reached training.
`scratchlm data audit rate SHEET` asks about each one in the terminal, saving after every answer. The labels
turn into a measured precision per rule (audit_verdicts.py): filters are tuned on someone else's corpus, and
only a sample of one's own decisions says what a rule costs here.

Sheet (JSON): a header (`kind`, `data_id`, `created`, `questions`, `decisions`: how many decisions each rule
made per source, for the rules nobody labeled) and `items`, each with id, doc, source, rule, level, stage,
detail, text, label (null | "right" | "wrong") and note. "right" means the decision was correct, for a removal
and for a kept document alike.
"""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Iterator

from ..atomic import atomic_write_text
from ..errors import UserError
from ..ids import read_json
from ..rating import QUIT, SKIP, ask_answer
from .audit import ledger_records
from .jsonl import read_jsonl

SHEET_KIND = "scratchlm data audit"
KEPT = "kept"  # the pseudo-rule of documents that reached training: its wrong ones are junk that got through
QUESTIONS = {"rule": "Was removing this right?", KEPT: "Should this document have been kept?"}
LABELS = ("right", "wrong")
KEPT_CHARS = 2000  # enough of a kept document to judge it; the sheet stays readable
AUDIT_DIR = "audit"
DEFAULT_SHEET = "sheet.json"
ITEM_KEYS = ("id", "source", "rule", "text", "label")


def kind_of(rule: str) -> str:
    return KEPT if rule == KEPT else "rule"


def spread_positions(total: int, n: int) -> list[int]:
    """n of range(total), each in the middle of its n-th stretch: deterministic, and spread over the whole
    ledger, because the first records of a rule all come from the first work unit of one source."""
    if total <= n:
        return list(range(total))
    return [(2 * i + 1) * total // (2 * n) for i in range(n)]


def default_sheet_path(data_dir: Path) -> Path:
    return Path(data_dir) / AUDIT_DIR / DEFAULT_SHEET


# --- writing a sheet ---------------------------------------------------------------------------------------

def count_ledger(data_dir: Path) -> dict[str, Counter]:
    """source -> rule -> records in the ledger."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for r in ledger_records(data_dir):
        counts[r["source"]][r["rule"]] += 1
    return counts


def _rule_items(data_dir: Path, counts: dict[str, Counter], sources: list[str], n: int) -> list[dict]:
    wanted = {(s, rule): set(spread_positions(k, n)) for s in sources for rule, k in counts.get(s, {}).items()}
    seen: Counter = Counter()
    last_doc: dict[tuple, tuple[str, int]] = {}  # a document's cuts by one rule sit together in the ledger
    items = []
    for r in ledger_records(data_dir):
        key = (r["source"], r["rule"])
        if key not in wanted:
            continue
        doc, occurrence = r["id"], 1
        if last_doc.get(key, ("", 0))[0] == doc:
            occurrence = last_doc[key][1] + 1
        last_doc[key] = (doc, occurrence)
        if seen[key] in wanted[key]:
            items.append(_rule_item(r, occurrence))
        seen[key] += 1
    return items


def _rule_item(r: dict, occurrence: int) -> dict:
    level = r.get("level", "document")
    # a cut line is judged with its neighbours when the ledger has them; a dropped document by its opening
    text = (r.get("context") or r["excerpt"]) if level != "document" else r["excerpt"]
    item = {"id": f"{r['rule']}@{r['id']}" + (f"#{occurrence}" if occurrence > 1 else ""), "doc": r["id"],
            "source": r["source"], "rule": r["rule"], "level": level, "stage": r["stage"],
            "detail": r.get("detail", ""), "text": text, "label": None, "note": ""}
    if r.get("score") is not None:
        item["score"] = r["score"]
    return item


def _kept_docs(data_dir: Path, stats: dict, source: str) -> Iterator[dict]:
    for name in stats.get("train_files", {}).get(source, []):
        for doc in read_jsonl(data_dir / "train" / name):
            if doc.get("source", source) == source:
                yield doc


def _kept_items(data_dir: Path, stats: dict, source: str, n: int) -> tuple[int, list[dict]]:
    total = sum(1 for _ in _kept_docs(data_dir, stats, source))
    wanted = set(spread_positions(total, n))
    items = []
    for i, doc in enumerate(_kept_docs(data_dir, stats, source)):
        if i in wanted:
            text = doc["text"] if len(doc["text"]) <= KEPT_CHARS else doc["text"][:KEPT_CHARS] + " […]"
            items.append({"id": f"{KEPT}@{doc['id']}", "doc": doc["id"], "source": source, "rule": KEPT,
                          "level": "document", "stage": "train", "detail": "", "text": text, "label": None,
                          "note": ""})
    return total, items


def _sources(stats: dict, source: str | None) -> tuple[list[str], list[str]]:
    """Every source of the artifact, and those to sample."""
    known = list(stats["sources"])
    if source is not None and source not in known:
        raise UserError(f"no source `{source}` in this data artifact; sources: {', '.join(known)}")
    return known, [source] if source else known


def build_sheet(data_dir: Path, data_id: str, per_rule: int, source: str | None = None) -> dict:
    """Per (source, rule) an evenly spread sample of `per_rule` ledger records, and per source as many kept
    documents; grouped by source, rules in the order the steps run."""
    if per_rule < 1:
        raise UserError(f"--per-rule must be at least 1 (got {per_rule})")
    data_dir = Path(data_dir)
    stats = read_json(data_dir / "stats.json")
    known, sources = _sources(stats, source)
    counts = count_ledger(data_dir)
    items = _rule_items(data_dir, counts, sources, per_rule)
    decisions = {s: dict(counts.get(s, {})) for s in known}
    for s in sources:
        total, kept = _kept_items(data_dir, stats, s, per_rule)
        decisions[s][KEPT] = total
        items += kept
    # one rule's items together, rules in the order the ledger first names them (the order their steps run),
    # kept documents last, ledger order within a rule
    order = {s: i for i, s in enumerate(known)}
    rule_order = {(s, rule): i for s in known for i, rule in enumerate([*counts.get(s, {}), KEPT])}
    items.sort(key=lambda it: (order[it["source"]], rule_order[(it["source"], it["rule"])]))
    return {"kind": SHEET_KIND, "data_id": data_id, "data_dir": str(data_dir), "created": _now(), "labeled": None,
            "source": source, "per_rule": per_rule, "questions": QUESTIONS,
            "answers": {"right": "the decision was correct", "wrong": "the decision was a mistake"},
            "decisions": decisions, "items": items}


def write_audit_sheet(data_dir: Path, data_id: str, per_rule: int, source: str | None = None,
                      out: Path | None = None, force: bool = False) -> tuple[Path, dict]:
    out = Path(out) if out else default_sheet_path(data_dir)
    _sources(read_json(Path(data_dir) / "stats.json"), source)  # a mistyped source first: it is the real error
    if out.exists() and not force:
        try:
            labeled = sum(it["label"] is not None for it in load_audit_sheet(out)["items"])
        except UserError:
            raise UserError(f"{out} exists and is not an audit sheet; pass --force to replace it") from None
        if labeled:
            raise UserError(f"{out} already holds {labeled} labels; pass --force to replace it, or --out "
                            "another path for a second sheet")
    sheet = build_sheet(data_dir, data_id, per_rule, source)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_audit_sheet(sheet, out)
    return out, sheet


# --- reading and saving ------------------------------------------------------------------------------------

def _label(value, where: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    label = value.strip().lower() if isinstance(value, str) else value
    if label not in LABELS:
        raise UserError(f"{where}: label {value!r} is not one of right, wrong or null")
    return label


def load_audit_sheet(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"audit sheet {path} not found (write one with `scratchlm data audit -c CONFIG`)")
    try:
        sheet = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"{path}: not JSON, so not an audit sheet") from None
    if not isinstance(sheet, dict) or sheet.get("kind") != SHEET_KIND or not isinstance(sheet.get("items"), list):
        raise UserError(f"{path}: not a scratchlm audit sheet (no `kind = {SHEET_KIND!r}` and `items`)")
    for n, item in enumerate(sheet["items"], 1):
        name = item.get("id", f"#{n}") if isinstance(item, dict) else f"#{n}"
        missing = [k for k in ITEM_KEYS if not isinstance(item, dict) or k not in item]
        if missing:
            raise UserError(f"{path} item {name}: missing {', '.join(f'`{k}`' for k in missing)}")
        item["label"] = _label(item["label"], f"{path} item {name}")
        item.setdefault("note", "")
    return sheet


def save_audit_sheet(sheet: dict, path: Path) -> None:
    atomic_write_text(Path(path), json.dumps(sheet, indent=2, ensure_ascii=False) + "\n")


def load_audit_dir(data_dir: Path) -> dict | None:
    """Every sheet in `<data dir>/audit/`, merged by item id; None when there is none. Sheets are read oldest
    label first, so where two sheets label one item the later judgment counts."""
    paths = sorted(Path(data_dir, AUDIT_DIR).glob("*.json"))
    if not paths:
        return None
    sheets = [(load_audit_sheet(p), p) for p in paths]
    sheets.sort(key=lambda sp: (sp[0].get("labeled") or "", sp[1].name))
    items: dict[str, dict] = {}
    decisions: dict[str, dict] = defaultdict(dict)
    for sheet, _ in sheets:
        for source, rules in (sheet.get("decisions") or {}).items():
            decisions[source].update(rules)
        for item in sheet["items"]:
            if item["id"] not in items:
                items[item["id"]] = dict(item)
            elif item["label"] is not None:
                items[item["id"]].update(label=item["label"], note=item.get("note", ""))
    return {"items": list(items.values()), "decisions": dict(decisions), "sheets": paths}


# --- labeling in the terminal ------------------------------------------------------------------------------

def _parse_label(raw: str) -> tuple[str, str] | None:
    """`r` / `right` / `w` / `wrong`, optionally followed by a note: `w the second line was real content`."""
    word, _, note = raw.partition(" ")
    label = {"r": "right", "right": "right", "w": "wrong", "wrong": "wrong"}.get(word.lower())
    return (label, note.strip()) if label else None


def _show(item: dict, position: int, todo: int) -> str:
    what = "kept document" if item["rule"] == KEPT else f"{item['rule']} ({item.get('level', 'document')}, " \
                                                         f"step {item.get('stage', '?')})"
    lines = [f"\n--- {position} / {todo}: {item['source']} / {what}  [{item.get('doc', item['id'])}] ---"]
    if item.get("detail"):
        lines.append(f"detail: {item['detail']}")
    lines += ["  | " + line for line in (item["text"] or "(empty)").splitlines() or [""]]
    return "\n".join(lines)


def rate_audit_sheet(path: Path, ask: Callable[[str], str] = input, say: Callable[[str], None] = print) -> dict:
    """Ask about every unlabeled item: r = right, w = wrong (either may be followed by a note), s = skip,
    q = quit. Saved after every answer, so a session can stop anywhere and resume with the same command."""
    path = Path(path)
    sheet = load_audit_sheet(path)
    todo = [it for it in sheet["items"] if it["label"] is None]
    questions = {**QUESTIONS, **(sheet.get("questions") or {})}
    say(f"Labeling {len(todo)} of {len(sheet['items'])} cleaning decisions (data {sheet.get('data_id', '?')}). "
        f"'right' means the decision was correct:")
    for kind, question in questions.items():
        say(f"  {'kept documents' if kind == KEPT else 'removals'}: {question}")
    for position, item in enumerate(todo, 1):
        say(_show(item, position, len(todo)))
        answer = ask_answer(ask, f"{questions[kind_of(item['rule'])]} (r=right, w=wrong, s=skip, q=quit): ",
                            _parse_label, say, "  please answer r (right), w (wrong), s (skip) or q (quit)")
        if answer == QUIT:
            save_audit_sheet(sheet, path)
            say(f"saved {path}; run `scratchlm data audit rate {path}` again to continue")
            return sheet
        if answer == SKIP:
            continue
        item["label"], note = answer
        if note:
            item["note"] = note
        sheet["labeled"] = _now()
        save_audit_sheet(sheet, path)
    say(f"saved {path}")
    return sheet


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")
