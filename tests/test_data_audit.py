"""`scratchlm data audit`: the labeling sheet (evenly spread, deterministic samples per source and rule), the
terminal labeling session (saved after every answer, resumable), the figures (Wilson intervals, warnings that
name the `skip_rules` line, "not audited" for unlabeled rules), the `scratchlm check` line and the report table."""
import json
import subprocess
import sys

import pytest

from scratchlm.cli import main
from scratchlm.data.audit_sheet import (KEPT, build_sheet, default_sheet_path, load_audit_dir, load_audit_sheet,
                                        rate_audit_sheet, save_audit_sheet, spread_positions, write_audit_sheet)
from scratchlm.data.audit_verdicts import MAX_WRONG_RATE, NOT_AUDITED, audit_figures, wilson_interval
from scratchlm.data.jsonl import ShardWriter
from scratchlm.errors import UserError
from scratchlm.plan.check import _audit_verdict
from scratchlm.plan.verdicts import NOT_AVAILABLE
from scratchlm.report.build import _table
from scratchlm.report.data_section import audit_section, data_section
from scratchlm.stages import load_config, plan_artifacts

# --- a synthetic data directory: ledger, kept documents, stats -------------------------------------------


def _synthetic(tmp_path, n_a=100, n_kept=50):
    """Source `s`: rule `a` drops documents s/f:0..n_a-1, interleaved with `b` cutting lines (two from each
    document, the second with a `context`); source `t`: one `a` record. Kept documents s/k:0..n_kept-1."""
    d = tmp_path / "data"
    with ShardWriter(d, "rejected", per_shard=1_000_000) as w:
        for i in range(n_a):
            w.write({"source": "s", "id": f"s/f:{i}", "stage": "quality", "rule": "a", "detail": f"d{i}",
                     "excerpt": f"dropped {i}", "level": "document", "score": 0.5})
            if i % 10 == 0:
                w.write({"source": "s", "id": f"s/g:{i}", "stage": "boilerplate", "rule": "b", "detail": "",
                         "excerpt": f"line {i}", "level": "line"})
                w.write({"source": "s", "id": f"s/g:{i}", "stage": "boilerplate", "rule": "b", "detail": "",
                         "excerpt": f"line {i}b", "level": "line", "context": f"before\n>> line {i}b\nafter"})
        w.write({"source": "t", "id": "t/f:0", "stage": "read", "rule": "a", "detail": "", "excerpt": "x",
                 "level": "document"})
    with ShardWriter(d / "train", "s", per_shard=20) as w:  # three shards: the order runs across files
        for i in range(n_kept):
            w.write({"id": f"s/k:{i}", "text": f"kept document {i} " + "long " * (1000 if i == 5 else 1),
                     "source": "s"})
    train = sorted(p.name for p in (d / "train").glob("*.zst"))
    (d / "stats.json").write_text(json.dumps({
        "sources": {"s": {"train": {"docs": n_kept}}, "t": {"train": {"docs": 0}}},
        "train_files": {"s": train, "t": []}}))
    return d


def test_sample_is_evenly_spread_over_the_ledger_and_deterministic(tmp_path):
    assert spread_positions(100, 5) == [10, 30, 50, 70, 90]
    assert spread_positions(3, 5) == [0, 1, 2]
    assert spread_positions(21, 20) == sorted(set(spread_positions(21, 20)))  # distinct even when crowded
    d = _synthetic(tmp_path)
    sheet = build_sheet(d, "dataid", per_rule=5)
    by_rule = lambda s, r: [it for it in sheet["items"] if (it["source"], it["rule"]) == (s, r)]
    assert [it["doc"] for it in by_rule("s", "a")] == [f"s/f:{i}" for i in (10, 30, 50, 70, 90)]
    assert [it["doc"] for it in by_rule("s", KEPT)] == [f"s/k:{i}" for i in (5, 15, 25, 35, 45)]
    assert [it["doc"] for it in by_rule("t", "a")] == ["t/f:0"] and not by_rule("t", KEPT)
    # `b` has 20 records, 2 per document: the sample's ids stay unique, and a cut line is judged in context
    assert len(by_rule("s", "b")) == 5 and len({it["id"] for it in sheet["items"]}) == len(sheet["items"])
    b = [it for it in build_sheet(d, "dataid", per_rule=4)["items"] if it["rule"] == "b"]
    assert [it["id"] for it in b] == ["b@s/g:10", "b@s/g:30#2", "b@s/g:60", "b@s/g:80#2"]
    assert [it["text"] for it in b] == ["line 10", "before\n>> line 30b\nafter", "line 60",
                                        "before\n>> line 80b\nafter"]
    assert b[0]["level"] == "line" and b[0]["doc"] == "s/g:10"
    first = by_rule("s", "a")[0]
    assert first["text"] == "dropped 10" and first["detail"] == "d10" and first["level"] == "document"
    assert first["label"] is None and first["note"] == "" and first["stage"] == "quality"
    assert by_rule("s", KEPT)[0]["text"].endswith("[…]")  # a long kept document is cut for the sheet
    assert sheet["questions"] == {"rule": "Was removing this right?", KEPT: "Should this document have been kept?"}
    assert sheet["decisions"] == {"s": {"a": 100, "b": 20, KEPT: 50}, "t": {"a": 1, KEPT: 0}}
    again = build_sheet(d, "dataid", per_rule=5)
    assert again["items"] == sheet["items"]
    only = build_sheet(d, "dataid", per_rule=5, source="t")
    assert {it["source"] for it in only["items"]} == {"t"} and only["decisions"]["s"]["a"] == 100
    with pytest.raises(UserError, match="no source `nope`.*s, t"):
        build_sheet(d, "dataid", per_rule=5, source="nope")


def test_an_existing_labeled_sheet_is_not_overwritten_without_force(tmp_path):
    d = _synthetic(tmp_path)
    path, sheet = write_audit_sheet(d, "dataid", 3)
    assert path == default_sheet_path(d) == d / "audit" / "sheet.json"
    write_audit_sheet(d, "dataid", 3)  # nothing labeled yet: replacing it loses nothing
    sheet = load_audit_sheet(path)
    sheet["items"][0]["label"] = "wrong"
    save_audit_sheet(sheet, path)
    with pytest.raises(UserError, match=r"sheet.json already holds 1 labels; pass --force"):
        write_audit_sheet(d, "dataid", 3)
    write_audit_sheet(d, "dataid", 3, force=True)
    assert all(it["label"] is None for it in load_audit_sheet(path)["items"])


# --- labeling in the terminal ------------------------------------------------------------------------------


def _scripted(answers, path, seen):
    """An `ask` that answers from a list and records, before each question, the labels already on disk."""
    answers = iter(answers)

    def ask(prompt):
        seen.append([it["label"] for it in json.loads(path.read_text())["items"]])
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None
    return ask


def test_rate_saves_after_every_answer_and_resumes(tmp_path):
    d = _synthetic(tmp_path)
    path, _ = write_audit_sheet(d, "dataid", 2)
    n = len(load_audit_sheet(path)["items"])
    seen, said = [], []
    ask = _scripted(["r", "maybe", "w the second line is content", "s", "q"], path, seen)
    rate_audit_sheet(path, ask=ask, say=said.append)
    assert seen[1][:1] == ["right"]  # on disk before the next question
    assert seen[3][:2] == ["right", "wrong"]  # "maybe" was asked again
    assert any("please answer r (right), w (wrong), s (skip) or q (quit)" in s for s in said)
    assert any("Was removing this right?" in s for s in said)
    sheet = load_audit_sheet(path)
    assert [it["label"] for it in sheet["items"][:4]] == ["right", "wrong", None, None]
    assert sheet["items"][1]["note"] == "the second line is content" and sheet["labeled"]
    assert any("data audit rate" in s and "again to continue" in s for s in said)
    # resumed: the skipped item comes first; end of input quits and keeps what was answered
    seen = []
    rate_audit_sheet(path, ask=_scripted(["w", "r"], path, seen), say=lambda _: None)
    assert [it["label"] for it in load_audit_sheet(path)["items"][:4]] == ["right", "wrong", "wrong", "right"]
    rate_audit_sheet(path, ask=_scripted(["r"] * n, path, []), say=lambda _: None)
    labels = [it["label"] for it in load_audit_sheet(path)["items"]]
    assert None not in labels
    kept_prompts = []
    sheet = load_audit_sheet(path)
    next(it for it in sheet["items"] if it["rule"] == KEPT)["label"] = None
    save_audit_sheet(sheet, path)
    rate_audit_sheet(path, ask=lambda p: kept_prompts.append(p) or "r", say=lambda _: None)
    assert kept_prompts and kept_prompts[0].startswith("Should this document have been kept?")


def test_rate_through_a_pipe_ends_at_eof_without_traceback(tmp_path):
    d = _synthetic(tmp_path)
    path, _ = write_audit_sheet(d, "dataid", 2)
    r = subprocess.run([sys.executable, "-m", "scratchlm", "data", "audit", "rate", str(path)], input="r\nw\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [it["label"] for it in load_audit_sheet(path)["items"][:3]] == ["right", "wrong", None]
    assert "a on s: 1/2 = 50%" in r.stdout  # the figures so far, printed when the session ends


# --- the figures and verdicts ------------------------------------------------------------------------------


def _items(source, rule, wrong, right, unlabeled=0):
    labels = ["wrong"] * wrong + ["right"] * right + [None] * unlabeled
    return [{"id": f"{rule}@{source}:{i}", "source": source, "rule": rule, "label": lab, "text": "x", "note": ""}
            for i, lab in enumerate(labels)]


def test_wilson_interval_matches_known_values():
    low, high = wilson_interval(4, 20)
    assert low == pytest.approx(0.0807, abs=5e-4) and high == pytest.approx(0.4160, abs=5e-4)
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=5e-4))
    assert wilson_interval(10, 10) == (pytest.approx(0.7225, abs=5e-4), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_a_rule_above_ten_percent_warns_with_the_skip_rules_line_and_unlabeled_rules_are_not_audited():
    assert MAX_WRONG_RATE == 0.10
    items = (_items("docs-de", "repeated_line", 4, 16) + _items("docs-de", "language", 2, 18)
             + _items("docs-de", "promotional", 0, 0, unlabeled=5) + _items("docs-de", KEPT, 3, 17))
    ledger = {"docs-de": {"repeated_line": 90, "near_duplicate": 4}}
    figures = {(f.source, f.rule): f for f in audit_figures(items, ledger)}
    rep = figures[("docs-de", "repeated_line")]
    assert (rep.labeled, rep.wrong, rep.level, rep.decisions) == (20, 4, "warning", 90)
    assert rep.figure() == "4/20 = 20% (8-42%)"
    assert 'skip_rules = ["repeated_line"]' in rep.message() and 'name = "docs-de"' in rep.message()
    assert "[[data.sources]]" in rep.message()
    assert figures[("docs-de", "language")].level == "ok"  # 10% is not above 10%
    for rule in ("promotional", "near_duplicate"):  # sampled but unlabeled; in the ledger, never sampled
        f = figures[("docs-de", rule)]
        assert f.level == NOT_AUDITED and f.rate is None and "not audited" in f.message()
    kept = figures[("docs-de", KEPT)]
    assert kept.level == "warning" and kept.message().startswith("junk kept on docs-de: 3/20 = 15%")
    assert "skip_rules" not in kept.message()
    assert list(figures)[-1] == ("docs-de", KEPT)


def _sheet(path, items, labeled="2025-01-01T00:00:00"):
    save_audit_sheet({"kind": "scratchlm data audit", "data_id": "x", "created": labeled, "labeled": labeled,
                      "decisions": {}, "items": items}, path)


def test_malformed_sheets_and_bad_labels_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    _sheet(bad, _items("s", "a", 1, 0) + [{**_items("s", "a", 1, 0)[0], "id": "a@s:9", "label": "maybe"}])
    with pytest.raises(UserError, match=r"bad.json item a@s:9: label 'maybe' is not one of right, wrong or null"):
        load_audit_sheet(bad)
    assert main(["data", "audit", "rate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json item a@s:9" in err[0]
    assert main(["data", "audit", "rate", str(tmp_path / "none.json")]) == 2
    assert "none.json not found" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="x.json: not a scratchlm audit sheet"):
        load_audit_sheet(tmp_path / "x.json")
    _sheet(tmp_path / "y.json", [{"id": "q", "source": "s", "label": None}])
    with pytest.raises(UserError, match=r"y.json item q: missing `rule`, `text`"):
        load_audit_sheet(tmp_path / "y.json")
    assert main(["data", "audit", "rate"]) == 2
    assert "usage: scratchlm data audit rate SHEET" in capsys.readouterr().err


def test_sheets_in_the_audit_folder_merge_by_item_id(tmp_path):
    d = _synthetic(tmp_path)
    first = _items("s", "a", 0, 0, unlabeled=2)
    (d / "audit").mkdir()
    _sheet(d / "audit" / "sheet.json", first, labeled="2025-01-01T00:00:00")
    second = [{**first[1], "label": "wrong"}] + _items("s", "b", 0, 1)
    _sheet(d / "audit" / "more.json", second, labeled="2025-02-01T00:00:00")
    audit = load_audit_dir(d)
    assert {it["id"]: it["label"] for it in audit["items"]} == {"a@s:0": None, "a@s:1": "wrong", "b@s:0": "right"}
    assert len(audit["sheets"]) == 2


# --- where users look: scratchlm check and the run report --------------------------------------------------

CONFIG = """
[run]
workdir = "run"
[data]
min_chars = 10
workers = 1
skip = ["boilerplate", "repeated_lines", "language", "quality", "promo", "fuzzy_dedup", "paragraph_dedup"]
[[data.sources]]
name = "web"
domain = "web"
path = "web.jsonl"
[[data.sources]]
name = "forum"
domain = "web"
path = "forum.jsonl"
"""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    for name in ("web", "forum"):
        docs = [f"{name} document number {i} with enough text" for i in range(30)] + ["short"] * 12
        docs += [f"{name} document number {i} with enough text" for i in range(6)]  # exact duplicates
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    (tmp / "scratchlm.toml").write_text(CONFIG)
    assert main(["data", "prepare", "-c", str(tmp / "scratchlm.toml")]) == 0
    cfg = load_config(tmp / "scratchlm.toml")
    return cfg, plan_artifacts(cfg)


def test_check_line_and_report_table_from_a_real_prepare(prepared, capsys):
    cfg, art = prepared
    data_dir = art["data"].dir
    v = _audit_verdict(art)
    assert v.name == "cleaning rules audited" and v.level == NOT_AVAILABLE
    assert "scratchlm data audit -c CONFIG" in v.summary
    stats = json.loads((data_dir / "stats.json").read_text())
    md = "\n".join(data_section(stats, None, None, _table, data_dir=data_dir))
    assert "### Cleaning rules: measured precision" in md
    assert "| web | too_short | 12 | 0 |  |  |  | not audited |" in md

    assert main(["data", "audit", "-c", str(cfg.path), "--per-rule", "5"]) == 0
    assert "label them with `scratchlm data audit rate" in capsys.readouterr().out
    path = default_sheet_path(data_dir)
    assert _audit_verdict(art).level == NOT_AVAILABLE  # a sheet without labels measures nothing
    sheet = load_audit_sheet(path)
    assert {(it["source"], it["rule"]) for it in sheet["items"]} == {
        (s, r) for s in ("web", "forum") for r in ("too_short", "exact_duplicate", KEPT)}
    for it in sheet["items"]:  # forum's exact duplicates stay unlabeled
        it["label"] = None if (it["source"], it["rule"]) == ("forum", "exact_duplicate") else "right"
    # one too_short removal on web was a mistake: 1/5 = 20%, above 10%
    next(it for it in sheet["items"] if (it["source"], it["rule"]) == ("web", "too_short"))["label"] = "wrong"
    save_audit_sheet(sheet, path)
    assert main(["data", "audit", "-c", str(cfg.path)]) == 2
    err = capsys.readouterr().err
    assert "already holds" in err and "--force" in err

    v = _audit_verdict(art)
    assert v.level == "warning"
    assert v.summary.startswith("3 rules audited on 2 sources (and kept documents on 2 sources), 1 above 10%: "
                                "too_short on web 1/5 = 20% (4-62%)")
    assert "1 not audited" in v.summary and 'skip_rules = ["too_short"]' in v.summary and 'name = "web"' in v.summary
    md = "\n".join(audit_section(stats, data_dir, _table))
    assert "| web | too_short | 12 | 5 | 1 | 20% | 4% – 62% | warning |" in md
    assert "| forum | exact_duplicate | 6 | 0 |  |  |  | not audited |" in md
    assert f"| web | kept (junk kept) | {stats['sources']['web']['train']['docs']} | 5 | 0 | 0% |" in md
    assert '`skip_rules = ["too_short"]` in the [[data.sources]] entry with `name = "web"`' in md


def test_a_second_sheet_for_one_source_is_merged_into_the_check(prepared, capsys):
    cfg, art = prepared
    out = art["data"].dir / "audit" / "forum.json"
    assert main(["data", "audit", "-c", str(cfg.path), "--source", "forum", "--per-rule", "3", "--out", str(out)]) == 0
    sheet = load_audit_sheet(out)
    assert {it["source"] for it in sheet["items"]} == {"forum"} and len(sheet["items"]) == 9
    for it in sheet["items"]:
        it["label"] = "right"
    save_audit_sheet(sheet, out)
    figures = audit_figures(**{k: v for k, v in load_audit_dir(art["data"].dir).items() if k != "sheets"})
    assert all(f.level != NOT_AUDITED for f in figures if f.source == "forum")
    assert main(["data", "audit", "-c", str(cfg.path), "--source", "nope"]) == 2
    assert "no source `nope`" in capsys.readouterr().err
    assert main(["data", "audit"]) == 2
    assert "needs -c CONFIG" in capsys.readouterr().err
