import json

from scratchlm.config import config_from_dict
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.prepare import prepare_data


# These documents are one-line templates: the content filters (language, quality, near-dup) would rightly
# drop them all, so these tests switch them off and exercise reading, length bounds, exact dedup and the split.
CONTENT_STEPS = ["boilerplate", "repeated_lines", "language", "quality", "promo", "fuzzy_dedup", "paragraph_dedup"]


def _cfg(tmp_path, docs, **data):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    cfg = config_from_dict({"data": {"sources": [{"name": "s", "domain": "web", "path": "in.jsonl"}],
                                     "min_chars": 10, "workers": 1, "skip": CONTENT_STEPS, **data}})
    cfg.path = tmp_path / "c.toml"
    return cfg


def _run(tmp_path, cfg):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return out, prepare_data(cfg, out)


def test_counts_add_up_and_everything_is_in_the_ledger(tmp_path):
    docs = [f"document number {i} with enough text" for i in range(40)]
    docs += ["short", docs[0], "  " + docs[1].upper() + "  ", "{not json"]
    cfg = _cfg(tmp_path, docs)
    (tmp_path / "in.jsonl").write_text((tmp_path / "in.jsonl").read_text().replace('{"text": "{not json"}', "{x"))
    out, stats = _run(tmp_path, cfg)
    s = stats["sources"]["s"]
    assert s["docs_in"] == 44
    assert s["dropped"] == {"too_short": 1, "exact_duplicate": 2, "malformed_json": 1}
    assert s["docs_in"] == s["docs_kept"] + sum(s["dropped"].values())
    ledger = list(read_jsonl(next(out.glob("rejected-*.jsonl.zst"))))
    assert len(ledger) == 4 and {r["rule"] for r in ledger} == set(s["dropped"])
    train = [d for f in (out / "train").glob("*.zst") for d in read_jsonl(f)]
    val = list(read_jsonl(out / "val" / "web.jsonl"))
    assert len(train) + len(val) == s["docs_kept"] == 40
    assert not {d["id"] for d in train} & {d["id"] for d in val}


def test_validation_split_is_reproducible_and_capped(tmp_path):
    docs = [f"document number {i} with enough text" for i in range(200)]
    cfg = _cfg(tmp_path, docs, val_fraction=0.1, val_max_docs=5)
    out, stats = _run(tmp_path, cfg)
    first = [d["id"] for d in read_jsonl(out / "val" / "web.jsonl")]
    assert len(first) == 5 and stats["validation_plan"]["web"]["held_out"] == 5
    out2 = tmp_path / "again"
    out2.mkdir()
    prepare_data(cfg, out2)
    assert [d["id"] for d in read_jsonl(out2 / "val" / "web.jsonl")] == first


def test_tiny_domain_gets_no_split_and_says_so(tmp_path):
    cfg = _cfg(tmp_path, ["a single document of text"])
    _, stats = _run(tmp_path, cfg)
    assert stats["validation_plan"]["web"]["held_out"] == 0
    assert "no validation split" in stats["validation_plan"]["web"]["note"]
