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


def test_glob_ids_are_paths_below_the_globs_fixed_prefix(tmp_path):
    # Two files of one name in two folders once shared the ID `s/numerictypes.py` (only the name was used).
    for folder in ("core", "lib"):
        (tmp_path / "numpy" / folder).mkdir(parents=True)
        (tmp_path / "numpy" / folder / "numerictypes.py").write_text(f"# {folder}")
    (tmp_path / "numpy" / "version.py").write_text("# top")
    ids = [d["id"] for d in _read(tmp_path, "numpy/**/*.py")]
    assert ids == ["s/core/numerictypes.py", "s/lib/numerictypes.py", "s/version.py"]
    assert [d["id"] for d in _read(tmp_path, "numpy/[cl]*/numerictypes.py")] == ids[:2]
    # a folder and a single file keep the IDs they always had
    assert [d["id"] for d in _read(tmp_path, "numpy")] == ids
    assert [d["id"] for d in _read(tmp_path, "numpy/core/numerictypes.py")] == ["s/numerictypes.py"]
    from pathlib import Path

    from scratchlm.data.readers import glob_root

    assert glob_root(Path("/d/numpy/**/*.py")) == Path("/d/numpy") and glob_root(Path("x/f[0-9].txt")) == Path("x")


def test_a_file_name_that_is_not_utf8_is_read_under_an_escaped_id(tmp_path):
    import os

    (tmp_path / "d").mkdir()
    with open(os.path.join(os.fsencode(tmp_path / "d"), b"caf\xe9.txt"), "wb") as f:
        f.write("un texte".encode())
    (doc,) = _read(tmp_path, "d")
    assert doc["id"] == "s/caf%E9.txt" and doc["text"] == "un texte"
    from scratchlm.data.doc_ids import escape_name

    assert escape_name(os.fsdecode(b"na\xefve\xff/\xe9t\xc3\xa9.md")) == "na%EFve%FF/%E9t\u00e9.md"  # UTF-8 stays
    assert escape_name("100% sure.txt") == "100% sure.txt"  # a valid name is never changed


def test_two_files_giving_one_id_stop_the_run_in_one_line_naming_both(tmp_path):
    import os

    from scratchlm.config import config_from_dict
    from scratchlm.data.units import plan_units
    from scratchlm.ids import DigestCache

    def plan(folder):
        cfg = config_from_dict({"data": {"sources": [{"name": "s", "domain": "d", "path": folder}]}})
        cfg.path = tmp_path / "c.toml"
        return plan_units(cfg, DigestCache(tmp_path / "digests.json"))

    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.jsonl").write_bytes(_jsonl_bytes(LINES))  # its first line is `s/a.jsonl:1` ...
    (tmp_path / "j" / "a.jsonl:1").write_text("a text file")  # ... and so is this file
    with pytest.raises(UserError, match=r"^source `s`: two files would give documents the same ID `s/a\.jsonl:1`: "
                                        r".*/j/a\.jsonl \(line or row 1\) and .*/j/a\.jsonl:1; rename one"):
        plan("j")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "caf%E9.txt").write_text("literal name")
    with open(os.path.join(os.fsencode(tmp_path / "e"), b"caf\xe9.txt"), "wb") as f:
        f.write(b"raw byte name")
    with pytest.raises(UserError, match=r"`s/caf%E9\.txt`: .*/e/caf%E9\.txt and .*/e/caf%E9\.txt; rename one") as e:
        plan("e")
    assert "\n" not in str(e.value)
    # Across sources (a name may hold a slash), and one file cut into line ranges is listed once per range
    from scratchlm.data.doc_ids import check_unique_ids

    with pytest.raises(UserError, match="^sources `a/b` and `a`: .* same ID `a/b/c.txt`"):
        check_unique_ids([("a/b", "a/b/c.txt", "/x/c.txt", "text"), ("a", "a/b/c.txt", "/y/b/c.txt", "text")])
    check_unique_ids([("s", "s/big.jsonl", "/x/big.jsonl", "jsonl")] * 3)
