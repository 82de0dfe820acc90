import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from scratchlm.config import SourceConfig
from scratchlm.data.readers import Rejected, infer_format, iter_source
from scratchlm.errors import UserError

LINES = [{"text": "first doc", "id": 7}, {"text": "second doc"}]


def _read(tmp_path, path, **kw):
    src = SourceConfig(name="s", domain="d", path=str(path), **kw)
    return list(iter_source(src, tmp_path))


def _jsonl_bytes(rows):
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.mark.parametrize("name,opener", [("a.jsonl", lambda b: b), ("a.jsonl.gz", gzip.compress),
                                         ("a.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b))])
def test_jsonl_variants(tmp_path, name, opener):
    (tmp_path / name).write_bytes(opener(_jsonl_bytes(LINES)))
    docs = _read(tmp_path, name)
    assert [d["text"] for d in docs] == ["first doc", "second doc"]
    assert docs[0]["id"] == f"s/{name}:1" and docs[0]["orig_id"] == 7
    assert docs[0]["source"] == "s" and docs[0]["domain"] == "d"


def test_text_folder_and_glob(tmp_path):
    (tmp_path / "f" / "sub").mkdir(parents=True)
    (tmp_path / "f" / "a.txt").write_text("alpha")
    (tmp_path / "f" / "sub" / "b.md").write_text("beta")
    docs = _read(tmp_path, "f")
    assert [(d["id"], d["text"]) for d in docs] == [("s/a.txt", "alpha"), ("s/sub/b.md", "beta")]
    assert [d["text"] for d in _read(tmp_path, "f/**/*.md")] == ["beta"]


def test_parquet(tmp_path):
    pq.write_table(pa.table({"body": ["one", "two", None]}), tmp_path / "x.parquet")
    items = _read(tmp_path, "x.parquet", text_field="body")
    assert [i["text"] for i in items if isinstance(i, dict)] == ["one", "two"]
    assert isinstance(items[2], Rejected) and items[2].rule == "missing_text_field"


def test_html_extracts_text(tmp_path):
    (tmp_path / "p.html").write_text("<html><body><nav>Home | About</nav><article><p>"
                                     + "Real article text about tokenizers. " * 20 + "</p></article></body></html>")
    (doc,) = _read(tmp_path, "p.html")
    assert "Real article text" in doc["text"] and "<p>" not in doc["text"]


def test_bad_input_is_recorded_not_raised(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "bin.txt").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "d" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "d" / "empty.txt").write_bytes(b"")
    (tmp_path / "d" / "x.jsonl").write_bytes(b'{"text": "ok"}\n{broken\n{"other": 1}\n')
    rules = sorted(i.rule for i in _read(tmp_path, "d") if isinstance(i, Rejected))
    assert rules == ["binary", "empty_file", "malformed_json", "missing_text_field", "not_utf8"]


def test_malformed_line_names_the_line(tmp_path):
    (tmp_path / "x.jsonl").write_bytes(b'{"text": "ok"}\n{broken\n')
    bad = [i for i in _read(tmp_path, "x.jsonl") if isinstance(i, Rejected)]
    assert bad[0].id == "s/x.jsonl:2" and "line 2" in bad[0].detail


def test_path_matching_nothing_names_the_source(tmp_path):
    with pytest.raises(UserError, match="source `s`: path `missing/\\*.txt` matches no file"):
        _read(tmp_path, "missing/*.txt")


def test_infer_format():
    from pathlib import Path

    assert infer_format(Path("a.jsonl.zst")) == "jsonl"
    assert infer_format(Path("a.parquet")) == "parquet"
    assert infer_format(Path("a.HTML")) == "html"
    assert infer_format(Path("notes")) == "text"


def test_a_folder_of_prose_skips_styles_scripts_and_images_but_counts_them(tmp_path):
    site = tmp_path / "site"
    (site / "img").mkdir(parents=True)
    (site / "index.html").write_text("<html><body><main><p>Welcome to the manual.</p></main></body></html>")
    (site / "notes").write_text("plain text without an extension is a document")
    (site / "theme.css").write_text(".hljs { color: #e6e1cf; }")
    (site / "search.js").write_text("function search() { return 1; }")
    (site / "img" / "diagram.svg").write_text("<svg><text>world</text></svg>")
    items = _read(tmp_path, "site")
    skipped = sorted(r.id for r in items if isinstance(r, Rejected) and r.rule == "not_a_document")
    assert skipped == ["s/img/diagram.svg", "s/search.js", "s/theme.css"]
    assert sorted(d["id"] for d in items if isinstance(d, dict)) == ["s/index.html", "s/notes"]
    # a code source reads them: there a .js file is the data; an explicit format reads everything
    code = [d["id"] for d in _read(tmp_path, "site", profile="code") if isinstance(d, dict)]
    assert "s/search.js" in code and "s/theme.css" in code
    assert all(isinstance(d, dict) for d in _read(tmp_path, "site", format="text"))
    assert infer_format(site / "search.js") == "skip" and infer_format(site / "search.js", code=True) == "text"


def test_validation_grows_to_a_minimum_of_text_within_the_share_a_domain_can_spare():
    from scratchlm.config import config_from_dict
    from scratchlm.data.step import Corpus
    from scratchlm.data.val_split import WHOLE, ValidationSettings, draw_validation, finish_plan

    def draw(n_docs, chars, **data):
        cfg = config_from_dict({"data": {"sources": [{"name": "a", "domain": "d", "path": "x"}], **data}})
        survivors = {"d": [(f"a/{k}", chars, "u0") for k in range(n_docs)]}
        chosen, plan = draw_validation(ValidationSettings.of(Corpus(cfg)), survivors)
        picked = chosen.get("u0", {})
        assert set(picked.values()) <= {WHOLE}  # documents this short are held out whole
        finish_plan(plan, {"d": {"docs": len(picked), "chars": chars * len(picked), "pieces": 0}}, cfg.data)
        return len(picked), plan["d"]

    # 2% of 1000 docs is 20 docs of 100 chars = 2,000 chars: drawn on to 20,000 chars (200 docs = 20% > 10%: cap)
    n, plan = draw(1000, 100, val_fraction=0.02, val_min_chars=20_000, val_max_share=0.1)
    assert n == 100 and plan["held_out_chars"] == 10_000 and "noisy" in plan["note"]
    n, plan = draw(1000, 1000, val_fraction=0.02, val_min_chars=20_000, val_max_share=0.1)
    assert n == 20 and plan["note"] == ""  # 20 docs already hold 20,000 chars
    assert draw(1000, 100, val_fraction=0.02, val_min_chars=0)[0] == 20
