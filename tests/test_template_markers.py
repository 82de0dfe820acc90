"""Chat-template and special-token markers in the corpus: the data stage reports where (file, line, context,
counts per marker and per source) and keeps the documents; the shards hold them as text, so the only special IDs
are each document's own BOS and EOS; the SFT leak check reads the data stage's result."""
import json

import numpy as np
import pytest

from scratchlm.config import config_from_dict
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.marker_scan import MarkerScan
from scratchlm.data.markers import MARKERS, count_markers
from scratchlm.data.prepare import prepare_data
from scratchlm.errors import UserError
from scratchlm.ids import read_json, write_json
from scratchlm.report.build import _table
from scratchlm.report.data_section import data_section
from scratchlm.sft.leak import scan_for_markers
from scratchlm.stages import size_estimate
from scratchlm.tokenizer import bpe
from scratchlm.tokenizer.bpe import (
    BOS,
    CHAT_TOKENS,
    EOS,
    SPECIAL_TOKENS,
    document_wrap_ids,
    save_tokenizer,
    special_ids,
    train_bpe,
)
from scratchlm.tokenizer.shards import TokenShard
from scratchlm.tokenizer.stage import tokenize_corpus

CONTENT_STEPS = ["boilerplate", "repeated_lines", "language", "quality", "promo", "fuzzy_dedup", "paragraph_dedup"]
CHAT = "a scraped chat log: <|user|> what is a fox? <|assistant|> a small wild dog<|end|> and more words"
LLAMA = "Prompt it as [INST] summarize this [/INST] and it answers; the format is documented here at length"


def _docs() -> list[str]:
    docs = [f"document number {i} about foxes and their dens in the hills" for i in range(30)]
    docs[4], docs[17] = CHAT, LLAMA
    return docs


def _prepare(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in _docs()))
    cfg = config_from_dict({"data": {"sources": [{"name": "s", "domain": "web", "path": "in.jsonl"}],
                                     "min_chars": 10, "workers": 1, "val_fraction": 0.1, "skip": CONTENT_STEPS},
                            "tokenizer": {"vocab_size": 400}, "shards": {"workers": 1}})
    cfg.path = tmp_path / "c.toml"
    out = tmp_path / "data"
    out.mkdir()
    return cfg, out, prepare_data(cfg, out, size_estimate(cfg))


def test_data_prepare_reports_each_marker_with_file_line_and_context_and_keeps_the_document(tmp_path, capsys):
    _, out, stats = _prepare(tmp_path)
    scan = stats["template_markers"]
    assert scan["found"] == {"<|user|>": 1, "<|assistant|>": 1, "<|end|>": 1, "[INST]": 1}
    assert scan["per_source"] == {"s": scan["found"]} and scan["docs_with_markers"] == 2
    at = {p["marker"]: p for p in scan["locations"]}
    assert at["<|user|>"]["file"].endswith("in.jsonl") and at["<|user|>"]["line"] == 5  # the input's own line
    assert at["[INST]"]["line"] == 18 and "summarize this" in at["[INST]"]["context"]
    assert "what is a fox" in at["<|user|>"]["context"]
    assert read_json(out / "stats.json")["template_markers"] == scan
    assert any("template markers" in w and "[INST]" in w for w in stats["warnings"])
    assert "data: warning: template markers" in capsys.readouterr().err
    kept = [d["text"] for f in [*(out / "train").glob("*"), *(out / "val").glob("*")] for d in read_jsonl(f)]
    assert CHAT in kept and LLAMA in kept  # a report, not a drop


def test_shards_hold_markers_as_text_only_the_pipelines_own_bos_eos_are_special(tmp_path, monkeypatch):
    cfg, data_dir, stats = _prepare(tmp_path)
    tok_dir, out = tmp_path / "tok", tmp_path / "shards"
    tok_dir.mkdir()
    out.mkdir()
    save_tokenizer(train_bpe(_docs() * 5, vocab_size=400, min_frequency=1), tok_dir)
    summary = tokenize_corpus(cfg, data_dir, tok_dir, out)
    tok = bpe.load_tokenizer(tok_dir / "tokenizer.json")
    opening, closing = document_wrap_ids(tok)
    specials = set(special_ids(tok).values())
    files = [out / "train" / f for v in summary["train"].values() for f in v["files"]]
    files += [out / "val" / f for v in summary["val"].values() for f in v["files"]]
    for path in files:
        shard = TokenShard(path)
        starts = shard.docs[:, 0]
        ends = np.append(starts[1:], len(shard))
        inner = np.ones(len(shard), dtype=bool)
        inner[starts], inner[ends - 1] = False, False
        assert (shard.tokens[starts] == opening).all() and (shard.tokens[ends - 1] == closing).all()
        assert not np.isin(shard.tokens[inner], list(specials)).any(), path
    assert summary["markers_as_text"] == stats["template_markers"]["found"]
    assert summary["special_ids_in_text"] == 0
    assert read_json(out / "shards.json")["markers_as_text"] == summary["markers_as_text"]
    md = "\n".join(data_section(stats, summary, None, _table))  # the report's data section says both
    assert "### Template markers" in md and "| s | `<\\|user\\|>` | 1 |" in md
    assert "in.jsonl | 18 | `[INST]` | Prompt it as [INST] summarize" in md
    assert "4 markers encoded as text, 0 special IDs beyond" in md
    # The guardrail sees special IDs that do come from the text: with markers read as special tokens, it stops.
    monkeypatch.setattr(bpe, "text_only", lambda t: t)
    again = tmp_path / "again"
    again.mkdir()
    train_only = sum(v["markers_as_text"].get(m, 0) for v in summary["train"].values() for m in SPECIAL_TOKENS)
    assert train_only > 0
    with pytest.raises(UserError, match=f"{train_only} special token IDs in the training shards came from"):
        tokenize_corpus(cfg, data_dir, tok_dir, again)


def test_the_sft_leak_check_reads_the_data_stage_result_and_scans_only_older_data(tmp_path):
    _, out, stats = _prepare(tmp_path)
    assert scan_for_markers(out) == stats["template_markers"]
    recorded = {**stats["template_markers"], "found": {"<|user|>": 99}}
    write_json(out / "stats.json", {**stats, "template_markers": recorded})
    assert scan_for_markers(out)["found"] == {"<|user|>": 99}  # read, not rescanned
    write_json(out / "stats.json", {k: v for k, v in stats.items() if k != "template_markers"})
    assert scan_for_markers(out)["found"] == stats["template_markers"]["found"]  # scanned, same function


def test_one_marker_list_for_data_tokenizer_and_sft():
    assert set(SPECIAL_TOKENS) <= set(MARKERS) and set(CHAT_TOKENS) <= set(MARKERS) and {BOS, EOS} <= set(MARKERS)
    assert count_markers("<|im_start|>x<|im_end|> [INST] <|bos|><|bos|>") == \
        {"<|im_start|>": 1, "<|im_end|>": 1, "[INST]": 1, "<|bos|>": 2}


def test_a_text_files_marker_is_placed_by_its_own_line():
    scan = MarkerScan()
    scan.add({"id": "docs/readme.md", "source": "docs", "text": "title\n\nuse <|user|> here"}, "unit.jsonl", 1)
    scan.add({"id": "s/in.jsonl:7", "source": "s", "text": "x <|eos|>"}, "unit.jsonl", 2)
    first, second = scan.result()["locations"]
    assert (first["file"], first["line"]) == ("docs/readme.md", 3)
    assert (second["file"], second["line"]) == ("s/in.jsonl", 7)
