"""The decontaminate stage, on the built-in corpus: an eval set made of training documents is reported, removed
from training (never from the eval set), traced through the shards, and the standalone command gives the same
numbers."""
import json

import pytest

from scratchlm.cli import main
from scratchlm.data.jsonl import read_jsonl
from scratchlm.tokenizer.provenance import resolve_shard, sidecar_path, trace
from scratchlm.decontaminate.corpus_scan import scan_corpus
from scratchlm.data.dedup.ngram_index import ContaminationIndex
from scratchlm.data.dedup.ngram_scan import scan_document
from scratchlm.decontaminate.stage import load_eval_sets
from scratchlm.errors import UserError
from scratchlm.ids import read_json
from scratchlm.stages import load_config, plan_artifacts, run_all, stage_data, stage_decontaminate
from scratchlm.tokenizer.bpe import load_tokenizer

EVAL_SET = '\n[[eval.sets]]\nname = "heldout"\npath = "heldout.jsonl"\ndomain = "docs"\n'


def train_docs(data_dir):
    stats = read_json(data_dir / "stats.json")
    return [d for files in stats["train_files"].values() for f in files for d in read_jsonl(data_dir / "train" / f)]


@pytest.fixture(scope="module")
def decontaminated_run(builtin_corpus, micro_config, tmp_path_factory):
    d = tmp_path_factory.mktemp("decontaminate")
    path = micro_config(d, builtin_corpus, steps=10, ckpt=10, extra=EVAL_SET)
    (d / "heldout.jsonl").write_text('{"id": "placeholder", "text": "a placeholder item"}\n')
    cfg = load_config(path)
    stage_data(cfg, plan_artifacts(cfg))
    # The eval set: three training documents of the docs domain (an item is the document's first 1500 chars).
    copied = [doc for doc in train_docs(plan_artifacts(cfg)["data"].dir) if doc["domain"] == "docs"][3:6]
    (d / "heldout.jsonl").write_text("".join(json.dumps({"id": f"q{k}", "text": doc["text"][:1500]}) + "\n"
                                             for k, doc in enumerate(copied)))
    before = (d / "heldout.jsonl").read_bytes()
    run_all(cfg)
    return cfg, copied, before


def test_overlap_is_reported_and_removed_from_training_only(decontaminated_run):
    cfg, copied, before = decontaminated_run
    art = plan_artifacts(cfg)
    assert (cfg.base_dir / "heldout.jsonl").read_bytes() == before  # the eval set is never touched
    copied_ids = {doc["id"] for doc in copied}
    kept_ids = {doc["id"] for doc in train_docs(art["decontaminate"].dir)}
    assert not copied_ids & kept_ids
    assert copied_ids <= {doc["id"] for doc in train_docs(art["data"].dir)}  # the data artifact is unchanged

    report = read_json(art["decontaminate"].dir / "contamination.json")
    heldout = report["eval_sets"]["heldout"]
    assert heldout["contaminated_items"] == ["q0", "q1", "q2"] and set(heldout["docs_touched"]) >= copied_ids
    assert heldout["verdict"] == "warning" and report["verdict"] in ("warning", "ok")
    ledger = list(read_jsonl(next(art["decontaminate"].dir.glob("rejected-*.jsonl.zst"))))
    assert copied_ids <= {r["id"] for r in ledger if r["rule"] == "contamination:heldout"}

    # Nothing of the removed documents reached the token shards; the validation split is passed on unchanged.
    shard_ids = {json.loads(line)["id"] for p in (art["shards"].dir / "train").glob("*.docs.jsonl")
                 for line in p.read_text().splitlines()}
    assert not copied_ids & shard_ids and kept_ids == shard_ids
    for val in (art["data"].dir / "val").glob("*.jsonl"):
        assert (art["decontaminate"].dir / "val" / val.name).read_bytes() == val.read_bytes()

    md = (cfg.workdir / "report.md").read_text()
    assert "## Contamination" in md and "| heldout | user |" in md and "## Domain mix" in md
    assert "achieved share" in md
    full = read_json(cfg.workdir / "report.json")
    assert {s["name"] for s in full["mix"]["sources"]} == {"code", "docs", "web"}
    assert sum(s["achieved_share"] for s in full["mix"]["sources"]) == pytest.approx(1.0)


def test_eval_set_ids_are_recorded_and_do_not_depend_on_training_data(decontaminated_run):
    cfg, _, _ = decontaminated_run
    lineage = read_json(cfg.workdir / "lineage.json")
    assert set(lineage["eval_sets"]) == {"heldout", "validation/code", "validation/docs", "validation/web"}
    recorded = lineage["eval_sets"]["heldout"]["id"]
    other = load_config(cfg.path)
    other.data.min_chars = 150  # other training data ...
    other.decontaminate.guard_validation = False
    assert plan_artifacts(other)["data"].id != plan_artifacts(cfg)["data"].id
    _, sets = load_eval_sets(other, plan_artifacts(cfg)["data"].dir)
    assert sets["heldout"]["id"] == recorded  # ... same eval set ID


def test_standalone_command_gives_the_same_numbers(decontaminated_run, capsys):
    cfg, _, _ = decontaminated_run
    art = plan_artifacts(cfg)
    capsys.readouterr()
    rc = main(["data", "contamination", "--train", str(art["data"].dir / "train"),
               "--eval", str(cfg.base_dir / "heldout.jsonl"), "--ngram", "13", "--json", "--workers", "1"])
    alone = json.loads(capsys.readouterr().out)["eval_sets"]["heldout"]
    staged = read_json(art["decontaminate"].dir / "contamination.json")["eval_sets"]["heldout"]
    assert rc == 1  # it only checks: an eval set found whole in the training files is an error there
    for key in ("items", "contaminated_items", "docs_touched", "removed_chars", "examples"):
        assert alone[key] == staged[key], key


def test_trace_names_the_source_document_of_a_token(decontaminated_run, capsys):
    cfg, _, _ = decontaminated_run
    art = plan_artifacts(cfg)
    shard = resolve_shard(art["shards"].dir, "docs")
    docs = [json.loads(line) for line in sidecar_path(shard).read_text().splitlines()]
    doc = docs[2]
    offset = doc["start"] + doc["tokens"] // 2
    t = trace(shard, offset, load_tokenizer(art["tokenizer"].dir / "tokenizer.json"), context=6)
    assert t["id"] == doc["id"] and t["offset_in_doc"] == doc["tokens"] // 2 and t["source"] == "docs"
    text = {d["id"]: d["text"] for d in train_docs(art["decontaminate"].dir)}[doc["id"]]
    assert t["before"] + t["token"] + t["after"] in text
    assert main(["data", "trace", "-c", str(cfg.path), "--shard", "train/docs", "--offset", str(offset)]) == 0
    assert doc["id"] in capsys.readouterr().out
    with pytest.raises(UserError, match="outside the shard"):
        trace(shard, 10**9, None)


def test_rerun_skips_the_stage(decontaminated_run, capsys):
    cfg, _, _ = decontaminated_run
    capsys.readouterr()
    run_all(cfg)
    assert "decontaminate: up to date, skipped" in capsys.readouterr().err


def test_eval_set_copying_the_training_data_stops_the_run(builtin_corpus, micro_config, tmp_path, capsys):
    # The eval set is the web source itself: most of the micro corpus's training text.
    extra = f'\n[[eval.sets]]\nname = "leak"\npath = "{builtin_corpus["web"]}"\n'
    path = micro_config(tmp_path, builtin_corpus, extra=extra)
    assert main(["run", "-c", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: decontaminate: eval set 'leak' overlaps a large part of the training data")
    cfg = load_config(path)
    result = stage_decontaminate(cfg, plan_artifacts(cfg), allow_contaminated=True)  # --force: go on
    assert result["eval_sets"]["leak"]["verdict"] == "error"


def test_span_mode_keeps_the_rest_of_a_document(builtin_corpus, micro_config, tmp_path):
    path = micro_config(tmp_path, builtin_corpus, extra=EVAL_SET + '[decontaminate]\nmode = "span"\n'
                                                                   'span_window = 50\nmin_piece_chars = 50\n')
    (tmp_path / "heldout.jsonl").write_text('{"id": "p", "text": "placeholder"}\n')
    cfg = load_config(path)
    stage_data(cfg, plan_artifacts(cfg))
    host = max((d for d in train_docs(plan_artifacts(cfg)["data"].dir) if d["domain"] == "docs"),
               key=lambda d: len(d["text"]))
    middle = host["text"][len(host["text"]) // 2:][:600]
    (tmp_path / "heldout.jsonl").write_text(json.dumps({"id": "mid", "text": middle}) + "\n")
    art = plan_artifacts(cfg)
    stage_decontaminate(cfg, art)
    pieces = [d for d in train_docs(art["decontaminate"].dir) if d["id"].startswith(host["id"] + "#")]
    assert len(pieces) == 2 and all(middle[100:400] not in p["text"] for p in pieces)
    assert host["text"].startswith(pieces[0]["text"]) and host["text"].endswith(pieces[1]["text"])
    after = read_json(art["decontaminate"].dir / "stats.json")["sources"]["docs"]["train"]
    before = read_json(art["data"].dir / "stats.json")["sources"]["docs"]["train"]
    kept = [d for d in train_docs(art["decontaminate"].dir) if d["source"] == "docs"]
    assert after["docs"] == len(kept) and after["chars"] == sum(len(d["text"]) for d in kept) < before["chars"]
    removed = read_json(art["decontaminate"].dir / "contamination.json")["chars_removed"]
    assert before["chars"] - after["chars"] == removed


def test_bad_eval_sets_are_named(builtin_corpus, micro_config, tmp_path):
    path = micro_config(tmp_path, builtin_corpus, extra=EVAL_SET)
    with pytest.raises(UserError, match=r"\[\[eval.sets\]\] `heldout`: .*heldout.jsonl not found"):
        plan_artifacts(load_config(path))
    (tmp_path / "heldout.jsonl").write_text("")
    with pytest.raises(UserError, match="heldout.jsonl: eval set 'heldout' is empty"):
        load_eval_sets(load_config(path), tmp_path)
    path.write_text(path.read_text().replace('domain = "docs"\n', 'domain = "docs"\nfields = ["question"]\n', 1))
    (tmp_path / "heldout.jsonl").write_text('{"answer": "x"}\n')
    with pytest.raises(UserError, match=r"heldout.jsonl:1: record has none of the fields question"):
        load_eval_sets(load_config(path), tmp_path)


def test_validation_split_removes_near_copies_only():
    item = " ".join(f"word{k}" for k in range(100))  # 100 distinct words: 88 13-grams
    index = ContaminationIndex.build([("validation/x", "v1", item)])
    words = item.split()
    docs = [{"id": "copy", "text": "intro text " + " ".join(words[:80]) + " outro"},  # 68 of 88 windows
            {"id": "quote", "text": "a quote: " + " ".join(words[10:40])},  # 18 of 88 windows
            {"id": "clean", "text": "nothing in common here at all"}]
    removed = []
    report = scan_corpus(index, docs, min_coverage={"validation/x": 0.5},
                         on_removal=lambda doc, matches, result: removed.append(doc["id"]))
    assert removed == ["copy"]
    s = report.sets["validation/x"]
    assert s.docs_touched == {"copy"} and s.partial_overlaps == 1
    assert index.coverage(scan_document(index, docs[0]["text"])[0]) == pytest.approx(68 / 88)


def test_config_mistakes_are_named(tmp_path):
    from scratchlm.config import config_from_dict, validate

    base = {"data": {"sources": [{"name": "a", "domain": "d", "path": "x"}]}}
    for extra, message in (({"decontaminate": {"mode": "spans"}}, "decontaminate.mode` must be document or span"),
                           ({"eval": {"sets": [{"name": "s", "path": "p"}, {"name": "s", "path": "q"}]}},
                            "name `s` is used twice"),
                           ({"eval": {"sets": [{"name": "validation/x", "path": "p"}]}}, "without `/`"),
                           ({"decontaminate": {"validation_min_coverage": 0}}, "must be in \\(0, 1\\]")):
        with pytest.raises(UserError, match=message):
            validate(config_from_dict({**base, **extra}), "t.toml")
    with pytest.raises(UserError, match="unknown key `feilds` in \\[eval.sets\\[0\\]\\]; did you mean `fields`"):
        config_from_dict({**base, "eval": {"sets": [{"name": "s", "path": "p", "feilds": ["q"]}]}})


def _encodings_run(micro_config, directory):
    """A code corpus of near-identical generated modules: the stdlib's codecs (cp1250.py, cp1251.py, ... differ
    in their tables, under the dedup's threshold, yet hold most of one another's 13-grams). Under the default
    fuzzy_threshold (0.7) dedup drops 37 of them as near copies, and what is left is no longer near-copied in
    training; at 0.8 (the default before bench/near_copies.py) it leaves them."""
    import encodings
    from pathlib import Path

    corpus = {"code": f"{Path(encodings.__file__).parent}/*.py"}
    cfg = load_config(micro_config(directory, corpus, extra="[decontaminate]\nworkers = 1\n"))
    cfg.data.fuzzy_threshold = 0.8
    art = plan_artifacts(cfg)
    stage_data(cfg, art)
    return cfg, art


def test_validation_is_drawn_without_documents_near_copied_in_training(micro_config, tmp_path):
    cfg, art = _encodings_run(micro_config, tmp_path)
    stats = read_json(art["data"].dir / "stats.json")
    plan = stats["validation_plan"]["code"]
    assert plan["near_copied"] > 0 and plan["held_out"] > 0 and "put back in training" in plan["note"]
    result = stage_decontaminate(cfg, art)  # raised before: 27% of the training text copied validation
    assert result["eval_sets"]["validation/code"]["contaminated_items"] == 0 and result["docs_touched"] == 0


def test_a_split_the_draw_could_not_clear_is_named_as_scratchlms_own(micro_config, tmp_path, monkeypatch):
    from scratchlm.data import split_step

    monkeypatch.setattr(split_step, "GUARD_ROUNDS", 1)  # the first draw only, as the split was drawn before
    cfg, art = _encodings_run(micro_config, tmp_path)
    with pytest.raises(UserError) as stop:
        stage_decontaminate(cfg, art)
    assert "'validation/code' is scratchlm's own validation split" in str(stop.value)
    assert "point the eval set" not in str(stop.value)


def test_near_copies_uses_the_guards_measure():
    from scratchlm.data.val_guard import near_copies

    item = " ".join(f"word{k}" for k in range(100))  # 88 13-grams
    words = item.split()
    docs = [{"id": "v", "text": item},  # the candidate itself: no copy of itself
            {"id": "copy", "text": "intro " + " ".join(words[:80])},  # 68 of 88 windows
            {"id": "quote", "text": "a quote: " + " ".join(words[10:40])}]  # 18 of 88
    assert near_copies({"v": item}, docs, 13, 8, 0.5) == {"v": {"copy": "copy", "coverage": round(68 / 88, 4)}}
    assert near_copies({"v": item}, docs, 13, 8, 0.8) == {}
    # over a pool of processes (the decontaminate stage's scan), in order: the same first copy
    many = docs + [{"id": f"later{k}", "text": item.replace("word5 ", f"x{k} ")} for k in range(300)]
    assert near_copies({"v": item}, many, 13, 8, 0.5, workers=2) == near_copies({"v": item}, many, 13, 8, 0.5)
