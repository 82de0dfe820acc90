import json
import random

from scratchlm.config import config_from_dict
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.prepare import prepare_data
from scratchlm.stages import size_estimate


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
    return out, prepare_data(cfg, out, size_estimate(cfg))


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
    prepare_data(cfg, out2, size_estimate(cfg))
    assert [d["id"] for d in read_jsonl(out2 / "val" / "web.jsonl")] == first


def test_tiny_domain_gets_no_split_and_says_so(tmp_path):
    cfg = _cfg(tmp_path, ["a single document of text"])
    _, stats = _run(tmp_path, cfg)
    assert stats["validation_plan"]["web"]["held_out"] == 0
    assert "no validation split" in stats["validation_plan"]["web"]["note"]


def _huge_and_small(tmp_path, **data):
    # One manual of 300 paragraphs that repeat a few sentences (so its tail shares many 13-grams with its head),
    # five short notes: the manual alone is far more than val_max_share of the domain.
    sentences = ["The daemon reads its configuration file at start and again on every reload signal.",
                 "Each option given on the command line overrides the value set in the configuration file.",
                 "Log messages go to the system journal unless a log file is named explicitly."]
    manual = "\n\n".join(f"Section {i}. " + " ".join(sentences[(i + k) % 3] for k in range(3)) for i in range(300))
    words = "river bridge orchard harbour railway bakery museum garden school market forest castle".split()
    notes = [f"note {i}: " + " ".join(random.Random(i).choices(words, k=300)) for i in range(5)]
    return _cfg(tmp_path, [manual] + notes, **{"val_fraction": 0.1, "val_min_chars": 20_000, "val_max_share": 0.1,
                                                **data})


def test_a_huge_document_gives_a_tail_and_the_split_stays_within_val_max_share(tmp_path):
    cfg = _huge_and_small(tmp_path)
    out, stats = _run(tmp_path, cfg)
    plan = stats["validation_plan"]["web"]
    val = list(read_jsonl(out / "val" / "web.jsonl"))
    train = [d for f in (out / "train").glob("*.zst") for d in read_jsonl(f)]
    total = sum(len(d["text"]) for d in val) + sum(len(d["text"]) for d in train)
    assert plan["held_out_chars"] == sum(len(d["text"]) for d in val) <= 0.1 * total
    assert plan["share"] <= 0.1 and plan["held_out"] == len(val)
    pieces = [d for d in val if d.get("split_from")]
    assert len(pieces) == 1 and plan["pieces"] == 1 and "tails of documents" in plan["note"]
    piece = pieces[0]
    head = next(d for d in train if d["id"] == piece["split_from"])
    assert piece["id"] == head["id"] + "#val" and head["held_out_piece"] == piece["id"]
    assert piece["text"].startswith("Section ") and head["text"].endswith(".")  # cut at a paragraph boundary
    assert len(head["text"]) > len(piece["text"])
    # The books balance: every document is in training once, the piece is extra text, not an extra document.
    assert stats["sources"]["s"]["train"]["docs"] == len(train) == 6 - (len(val) - 1)


def test_a_split_that_cannot_fit_val_max_share_says_so(tmp_path):
    cfg = _huge_and_small(tmp_path, val_max_share=0.01, min_chars=1000)
    _, stats = _run(tmp_path, cfg)
    plan = stats["validation_plan"]["web"]
    assert plan["held_out"] == 0 and "no document or paragraph-bounded tail fits in val_max_share 1%" in plan["note"]


def test_decontamination_does_not_take_a_held_out_tail_for_a_copy_of_its_own_document(tmp_path):
    from scratchlm.decontaminate.corpus_scan import scan_corpus
    from scratchlm.data.dedup.ngram_index import ContaminationIndex
    from scratchlm.decontaminate.stage import decontaminate_corpus, load_eval_sets

    cfg = _huge_and_small(tmp_path)
    out, _ = _run(tmp_path, cfg)
    guarded = tmp_path / "guarded"
    guarded.mkdir()
    result = decontaminate_corpus(cfg, out, guarded)
    assert result["docs_touched"] == 0 and result["verdict"] == "ok"
    # Without the exemption the head does hold the tail's n-grams: the exemption is what keeps it.
    index = ContaminationIndex.build(load_eval_sets(cfg, out)[0])
    train = [d for f in (out / "train").glob("*.zst") for d in read_jsonl(f)]
    report = scan_corpus(index, train, min_coverage={"validation/web": 0.5})
    assert report.docs_touched == 1


def test_the_step_that_raised_the_peak_memory_is_named(tmp_path):
    from scratchlm.data.prepare_manifest import memory_line

    _, manifest = _run(tmp_path, _cfg(tmp_path, [f"document number {i} with enough text" for i in range(20)]))
    assert list(manifest["peak_mib"])[:2] == ["start", "read"] and "split" in manifest["peak_mib"]
    line = memory_line({"start": 300.0, "read": 310.0, "find_duplicates": 900.0, "dedup": 905.0, "split": 40.0})
    assert line == "peak memory of the main process 905 MiB; find_duplicates raised it most (+590 MiB)"
    assert memory_line({}) is None
