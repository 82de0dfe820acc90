"""Score a system's decisions against the hand labels: per-rule false-positive rates, the false-negative rate,
and the kept share of every source.

An item's outcome under a system:
  doc:  kept | removed (the rule that dropped it)
  line: kept | removed (the rule that cut it out of a kept document) | with_doc (its document was dropped)
  either: not_in_input (the system's reader did not produce that document or line; not scored)
FP rate of a rule = labeled "content" items it removed / labeled items it removed (95% Wilson interval).
FN rate = labeled "junk" items the system kept / labeled junk items in its input. Removals nobody labeled are
counted as unlabeled, never as right.
"""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

from . import labels as L
from .systems import norm


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def outcomes(decisions: list[dict], inputs: dict[str, dict], labeled: dict[tuple, dict]) -> dict[tuple, tuple]:
    by_id = {d["id"]: d for d in decisions}
    removed_line = {(d["id"], ln): rule for d in decisions for ln, rule in d.get("removed_lines", [])}
    line_sets: dict[str, set] = {}
    out = {}
    for k, rec in labeled.items():
        d = by_id.get(rec["id"])
        doc_in = inputs.get(rec["id"])
        if d is None or doc_in is None or doc_in.get("text") is None:
            out[k] = ("not_in_input", None)
            continue
        if rec["kind"] == "doc":
            out[k] = ("kept", None) if d["status"] == "kept" else ("removed", d["rule"])
            continue
        if rec["id"] not in line_sets:
            line_sets[rec["id"]] = {norm(x) for x in doc_in["text"].split("\n") if x.strip()}
        if rec["line"] not in line_sets[rec["id"]]:
            out[k] = ("not_in_input", None)
        elif d["status"] != "kept":
            out[k] = ("with_doc", d["rule"])
        elif (rec["id"], rec["line"]) in removed_line:
            out[k] = ("removed", removed_line[(rec["id"], rec["line"])])
        else:
            out[k] = ("kept", None)
    return out


def score_system(root: Path, system: str, labels_path: Path = L.LABELS) -> dict:
    decisions = L.load_decisions(root, system)
    inputs = L.load_inputs(root, system)
    labeled = L.load_labels(labels_path)
    outc = outcomes(decisions, inputs, labeled)
    removals = L.removals(decisions)
    sampled = Counter(it["stratum"].split(":removed:", 1)[1] for it in L.draw(decisions, system)
                      if ":removed:" in it["stratum"])
    rules: dict[str, dict] = {}
    for rule, items in removals.items():
        level = "+".join(sorted({it["kind"] for it in items}))  # doc+line: a rule that both drops documents and cuts lines
        rules[rule] = {"level": level, "removals": len(items), "sampled": sampled.get(rule, 0),
                       "labeled": 0, "content": 0, "junk": 0, "content_examples": []}
    fn = {"doc": [0, 0], "line": [0, 0]}  # kind -> [junk kept, junk labeled in input]
    content_lost = {"doc": [0, 0], "line": [0, 0]}  # kind -> [content not kept, content labeled in input]
    with_doc = Counter()
    for k, (status, rule) in outc.items():
        rec = labeled[k]
        if status == "not_in_input":
            continue
        kind = rec["kind"]
        if rec["label"] == "junk":
            fn[kind][1] += 1
            fn[kind][0] += status == "kept"
        else:
            content_lost[kind][1] += 1
            content_lost[kind][0] += status != "kept"
        if status == "with_doc":
            with_doc[rec["label"]] += 1
        if status == "removed":
            r = rules[rule]
            r["labeled"] += 1
            r[rec["label"]] += 1
            if rec["label"] == "content" and len(r["content_examples"]) < 3:
                r["content_examples"].append({"id": rec["id"], **({"line": rec["line"][:120]} if kind == "line"
                                                                 else {}), "note": rec.get("note", "")})
    for r in rules.values():
        lo, hi = wilson(r["content"], r["labeled"])
        r.update(fp_rate=r["content"] / r["labeled"] if r["labeled"] else None, fp_ci95=[lo, hi],
                 unlabeled=r["removals"] - r["labeled"], coverage=r["labeled"] / r["removals"])
    per_source: dict[str, dict] = defaultdict(lambda: {"docs_in": 0, "docs_kept": 0, "chars_in": 0,
                                                      "chars_kept": 0})
    for d in decisions:
        s = per_source[d["source"]]
        text = (inputs.get(d["id"]) or {}).get("text") or ""
        s["docs_in"] += 1
        s["chars_in"] += len(text)
        if d["status"] == "kept":
            s["docs_kept"] += 1
            s["chars_kept"] += len(d["final"])
    for s in per_source.values():
        s["doc_share"] = s["docs_kept"] / max(s["docs_in"], 1)
        s["char_share"] = s["chars_kept"] / max(s["chars_in"], 1)
    junk_kept = fn["doc"][0] + fn["line"][0]
    junk_n = fn["doc"][1] + fn["line"][1]
    meta_path = root / "runs" / system / "meta.json"
    result = {
        "system": system,
        "meta": json.loads(meta_path.read_text()) if meta_path.exists() else {},
        "labels": {"items": len(labeled), "scored": sum(1 for s, _ in outc.values() if s != "not_in_input"),
                   "not_in_input": sum(1 for s, _ in outc.values() if s == "not_in_input")},
        "rules": dict(sorted(rules.items(), key=lambda kv: (-(kv[1]["fp_rate"] or 0), -kv[1]["removals"]))),
        "fn": {"rate": junk_kept / junk_n if junk_n else None, "ci95": list(wilson(junk_kept, junk_n)),
               "junk_kept": junk_kept, "junk_labeled": junk_n,
               "docs": {"kept": fn["doc"][0], "of": fn["doc"][1]}, "lines": {"kept": fn["line"][0],
                                                                           "of": fn["line"][1]}},
        "content_lost": {"docs": {"lost": content_lost["doc"][0], "of": content_lost["doc"][1]},
                         "lines": {"lost": content_lost["line"][0], "of": content_lost["line"][1]},
                         "lines_lost_with_dropped_doc": dict(with_doc)},
        "sources": dict(sorted(per_source.items())),
    }
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{system}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return result


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def markdown(res: dict) -> str:
    lines = [f"### {res['system']} ({res['meta'].get('code', '')})", "",
             "| rule | level | removals | sampled | labeled | content (FP) | junk | FP rate [95% CI] | unlabeled |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for rule, r in res["rules"].items():
        ci = f"{_pct(r['fp_rate'])} [{_pct(r['fp_ci95'][0])}, {_pct(r['fp_ci95'][1])}]" if r["labeled"] else "-"
        lines.append(f"| {rule} | {r['level']} | {r['removals']} | {r['sampled']} | {r['labeled']} | {r['content']}"
                     f" | {r['junk']} | {ci} | {r['unlabeled']} |")
    fn = res["fn"]
    cl = res["content_lost"]
    lines += ["", f"False negatives: {fn['junk_kept']} of {fn['junk_labeled']} labeled junk items kept = "
              f"{_pct(fn['rate'])} [{_pct(fn['ci95'][0])}, {_pct(fn['ci95'][1])}] (documents {fn['docs']['kept']}/"
              f"{fn['docs']['of']}, lines {fn['lines']['kept']}/{fn['lines']['of']}). Content lost: documents "
              f"{cl['docs']['lost']}/{cl['docs']['of']}, lines {cl['lines']['lost']}/{cl['lines']['of']} (of which "
              f"lost with their dropped document: {cl['lines_lost_with_dropped_doc'].get('content', 0)}). "
              f"Labels scored: {res['labels']['scored']}, not in this system's input: "
              f"{res['labels']['not_in_input']}.", "",
              "| source | docs in | docs kept | kept share (docs) | chars in | kept share (chars) |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, s in res["sources"].items():
        lines.append(f"| {name} | {s['docs_in']} | {s['docs_kept']} | {_pct(s['doc_share'])} | {s['chars_in']:,} | "
                     f"{_pct(s['char_share'])} |")
    return "\n".join(lines)


def score_command(root: Path, systems: list[str], labels_path: Path = L.LABELS) -> None:
    results = [score_system(root, s, labels_path) for s in systems]
    for res in results:
        print(markdown(res))
        print()
    if len(results) > 1:
        print("| system | FN rate | content docs lost | content lines lost | chars kept |")
        print("|---|---|---:|---:|---:|")
        for res in results:
            chars_in = sum(s["chars_in"] for s in res["sources"].values())
            chars_kept = sum(s["chars_kept"] for s in res["sources"].values())
            cl = res["content_lost"]
            print(f"| {res['system']} | {_pct(res['fn']['rate'])} ({res['fn']['junk_kept']}/"
                  f"{res['fn']['junk_labeled']}) | {cl['docs']['lost']}/{cl['docs']['of']} | "
                  f"{cl['lines']['lost']}/{cl['lines']['of']} | {_pct(chars_kept / max(chars_in, 1))} |")
    print(f"\nJSON: {', '.join(str(root / 'results' / (r['system'] + '.json')) for r in results)}")
