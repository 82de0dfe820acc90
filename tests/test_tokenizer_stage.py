"""Tokenizer stage: stratified sample, held-out fertility with verdicts, parallel split shards, tokenizer ID check."""
import numpy as np
import pytest

from scratchlm.cli import main
from scratchlm.data.jsonl import read_jsonl, write_jsonl
from scratchlm.errors import UserError
from scratchlm.ids import read_json
from scratchlm.stages import load_config, plan_artifacts, stage_training_inputs
from scratchlm.tokenizer.bpe import (BOS, DOC_SPECIALS, EOS, PAD, document_wrap_ids, load_tokenizer, save_tokenizer,
                                     shard_tokens, special_ids, train_bpe)
from scratchlm.tokenizer.fertility import verdicts
from scratchlm.tokenizer.parallel import ParallelEncoder, chunked
from scratchlm.tokenizer.report_section import tokenizer_section
from scratchlm.tokenizer.sample import StratifiedSample
from scratchlm.tokenizer.sample_plan import water_fill
from scratchlm.tokenizer.shards import TokenShard, check_tokenizer_matches
from scratchlm.train.loader import MixtureLoader
from tokenizer_fixtures import DE, EN, fake_data, tokenizer_cfg


@pytest.fixture(scope="module")
def run(builtin_corpus, micro_config, tmp_path_factory):
    cfg = load_config(micro_config(tmp_path_factory.mktemp("tok"), builtin_corpus,
                                   extra="[shards]\nshard_tokens = 4000\n"))
    art = plan_artifacts(cfg)
    stage_training_inputs(cfg, art)
    return cfg, art


def test_water_fill_gives_slack_of_small_keys_to_the_others():
    assert water_fill(100, {"a": 0.5, "b": 0.5}, {"a": 1000, "b": 1000}) == {"a": 50, "b": 50}
    assert water_fill(100, {"a": 0.5, "b": 0.25, "c": 0.25}, {"a": 10, "b": 1000, "c": 1000}) == \
        {"a": 10, "b": 45, "c": 45}
    assert water_fill(100, {"a": 1.0, "b": 0.0}, {"a": 1000, "b": 1000})["b"] == 0


def test_sample_follows_weights_and_language_quotas_and_never_holds_validation(tmp_path):
    def docs(prefix, text, n, domain):
        return [{"id": f"{prefix}{i}", "text": f"{i} {text * 3}", "domain": domain} for i in range(n)]

    prose = docs("en", EN, 200, "prose") + docs("de", DE, 200, "prose")
    leaked = dict(prose[7])  # in train and in validation: data prepare never does this, the sample must not care
    data = fake_data(tmp_path, {"prose": prose, "code": docs("code", "def f(x):\n    return x\n", 300, "code")},
                      [leaked])
    sources = [{"name": "prose", "domain": "prose", "path": "x", "weight": 3.0},
               {"name": "code", "domain": "code", "path": "y", "weight": 1.0}]
    sample = StratifiedSample(tokenizer_cfg(sources, sample_chars=40_000, language_quotas={"de": 0.6}), data)
    texts = list(sample.texts())
    comp = sample.composition()
    assert comp["chars"] == sum(map(len, texts)) == 40_000
    assert comp["domains"]["prose"]["chars"] == 30_000 and comp["domains"]["code"]["chars"] == 10_000
    assert comp["languages"]["de"]["chars"] == 18_000  # 0.6 of the prose sample, as asked
    assert comp["languages"]["en"]["chars"] == 12_000  # the rest
    assert comp["skipped"]["language_quota_full"] > 0 and comp["skipped"]["in_validation_split"] == 1
    assert 3 * comp["sources"]["code"]["target_chars"] == comp["sources"]["prose"]["target_chars"]
    sample = StratifiedSample(tokenizer_cfg(sources, sample_chars=10 ** 7), data)  # above the corpus: still 3:1
    texts = list(sample.texts())
    comp = sample.composition()
    assert leaked["text"] not in texts and comp["skipped"] == {"in_validation_split": 1}
    code, prose = comp["domains"]["code"], comp["domains"]["prose"]
    assert code["docs"] == 300 and prose["docs"] < 399  # the short domain gives all it has, the other is cut ...
    assert abs(prose["chars"] - 3 * code["chars"]) <= 3  # ... to its quota
    assert comp["plan"]["limited_by"] == [["domain", "code"]] and comp["chars"] == sum(map(len, texts)) < 10 ** 7


def test_sample_reads_the_language_the_data_stage_set_and_detects_only_where_none_is(tmp_path, monkeypatch):
    import scratchlm.tokenizer.langid as langid

    detected = []
    monkeypatch.setattr(langid, "language_of", lambda text: detected.append(text) or "en")
    labeled = [{"id": f"l{i}", "text": f"{i} {EN}", "domain": "prose", "lang": "fr"} for i in range(5)]
    unlabeled = {"id": "u", "text": f"u {EN}", "domain": "prose"}  # the language step was skipped
    data = fake_data(tmp_path, {"prose": [*labeled, unlabeled]}, [])
    sample = StratifiedSample(tokenizer_cfg([{"name": "prose", "domain": "prose", "path": "x"}],
                                            sample_chars=10 ** 6), data)
    list(sample.texts())
    languages = sample.composition()["languages"]
    assert languages["fr"]["docs"] == 5 and languages["en"]["docs"] == 1
    assert detected == [unlabeled["text"]]


def test_log_shows_quotas_and_the_actual_shares_of_the_sample(tmp_path, capsys):
    from scratchlm.tokenizer.stage import train_tokenizer

    small = [{"id": f"s{i}", "text": f"{i} {EN}", "domain": "small"} for i in range(5)]  # far below its quota
    big = [{"id": f"b{i}", "text": f"{i} {DE * 3}", "domain": "big"} for i in range(300)]
    (tmp_path / "data").mkdir()
    data = fake_data(tmp_path / "data", {"small": small, "big": big}, [{"id": "v", "text": EN, "domain": "big"}])
    sources = [{"name": "small", "domain": "small", "path": "x"}, {"name": "big", "domain": "big", "path": "y"}]
    cfg = tokenizer_cfg(sources, sample_chars=20_000)
    (tmp_path / "tok").mkdir()
    info = train_tokenizer(cfg, data, tmp_path / "tok")
    domains = info["sample"]["domains"]
    assert domains["small"]["quota"] == 0.5 and domains["small"]["share"] < 0.05
    err = capsys.readouterr().err
    assert "domain quotas: big 50%, small 50%" in err
    assert (f"quota -> actual share of the sample: big 50% -> {domains['big']['share']:.0%}, "
            f"small 50% -> {domains['small']['share']:.0%}") in err
    assert f"{domains['big']['share']:.0%}" != "50%"


def test_bad_quotas_are_user_errors(tmp_path):
    data = fake_data(tmp_path, {"a": [{"id": "1", "text": EN, "domain": "web"}]}, [])
    src = [{"name": "a", "domain": "web", "path": "x"}]
    with pytest.raises(UserError, match="domain_quotas names domain"):
        StratifiedSample(tokenizer_cfg(src, domain_quotas={"wbe": 1.0}), data)
    with pytest.raises(UserError, match="sum to at most 1"):
        StratifiedSample(tokenizer_cfg(src, language_quotas={"en": 0.8, "de": 0.5}), data)


def test_verdicts_flag_high_fertility_unequal_languages_and_unused_vocab():
    def lang(tpw, chars=1000, docs=40, largest=0.05):
        # tokens/word over every word is high in technical text; the verdict reads the prose figure
        return {"tokens_per_word": tpw + 0.5, "prose_tokens_per_word": tpw, "chars": chars, "chars_per_token": 3.0,
                "prose_docs": docs, "prose_words": 5000, "largest_doc_share": largest}

    result = {"languages": {"en": lang(1.2), "de": lang(1.9), "xx": lang(9.0, chars=1), "code": lang(5.0)},
              "vocab": {"size": 1000, "used_share": 0.8}, "overall": {"tokens": 10_000}}
    found = verdicts(result, min_share=0.02)
    out = {v["check"]: v["level"] for v in found}
    assert out == {"tokens/word en": "ok", "tokens/word de": "warning", "language cost ratio": "warning",
                   "vocabulary used": "warning", "degenerate vocabulary entries": "ok"}  # xx: too rare; code: not prose
    assert "small sample" not in " ".join(v["message"] for v in found)
    result["languages"]["de"] = lang(1.3, docs=3, largest=0.74)
    result["vocab"]["used_share"] = 0.95
    found = verdicts(result, min_share=0.02)
    assert {v["level"] for v in found} == {"ok"}  # 1.8 tokens per word over all words, 1.3 on prose: ok
    de = next(v["message"] for v in found if v["check"] == "tokens/word de")
    assert "only 3 document(s), the largest holding 74% of the prose words" in de
    result["vocab"].update(degenerate_count=2, degenerate=[{"token": "─" * 60, "bytes": 180}])
    flagged = next(v for v in verdicts(result, min_share=0.02) if v["check"] == "degenerate vocabulary entries")
    assert flagged["level"] == "warning" and "(180 B)" in flagged["message"]


def test_fertility_counts_prose_words_not_paths_options_or_code():
    from scratchlm.tokenizer.fertility import degenerate_entry, measure, prose_words

    manual = ("NAME\n       mount - mount a filesystem\n\nDESCRIPTION\n"
              "       The mount command attaches the file system found on a device to the big tree.\n\n"
              "       -o, --options opts\n              Use the given options, see /etc/fstab for details.\n\n"
              "EXAMPLES\n           $ mount -t ext4 /dev/sda1 /mnt/data\n")
    words = prose_words(manual)
    assert "attaches" in words and "Use" in words
    assert not {"/etc/fstab", "--options", "-o,", "/dev/sda1", "$", "NAME", "DESCRIPTION"} & set(words)
    tok = train_bpe([EN, DE] * 20, vocab_size=300, min_frequency=1)
    result = measure(tok, [{"text": manual, "domain": "docs", "lang": "en"}])
    en = result["languages"]["en"]
    assert en["prose_words"] == len(words) < en["words"] and en["prose_docs"] == 1 and en["largest_doc_share"] == 1
    assert en["prose_tokens_per_word"] == en["prose_tokens"] / en["prose_words"]
    assert degenerate_entry("─" * 60, 180) and degenerate_entry("=" * 40, 40)
    assert not degenerate_entry(" " * 40, 40) and not degenerate_entry("=" * 8, 8)
    assert not degenerate_entry("internationalization_and_localization", 37)


def test_saved_tokenizer_loads_in_transformers_with_special_tokens(tmp_path):
    from transformers import PreTrainedTokenizerFast

    save_tokenizer(train_bpe([EN, DE] * 20, vocab_size=300, min_frequency=1), tmp_path)
    hf = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert (hf.bos_token, hf.eos_token, hf.pad_token) == (BOS, EOS, PAD)
    assert hf.bos_token_id == 0 and hf.pad_token_id is not None
    assert hf.decode(hf(EN, add_special_tokens=False)["input_ids"]) == EN


def test_parallel_encoding_equals_sequential(tmp_path):
    tok = train_bpe([EN, DE, "x = [1, 2, 3]\n"] * 20, vocab_size=300, min_frequency=1)
    save_tokenizer(tok, tmp_path)
    texts = [(EN * (i % 7)) + DE[: i % 50] for i in range(300)]
    expected = [[0, *tok.encode(t, add_special_tokens=False).ids, 1] for t in texts]
    for workers in (1, 2):
        with ParallelEncoder(tmp_path / "tokenizer.json", np.uint16, (0, 1), workers=workers) as enc:
            got = [(t, n) for t, n in enc.encode(chunked(texts, max_chars=2000))]
        flat = np.concatenate([t for t, _ in got])
        lengths = np.concatenate([n for _, n in got])
        assert lengths.tolist() == [len(e) for e in expected]
        assert flat.tolist() == [i for e in expected for i in e]


def test_special_tokens_written_in_a_text_are_encoded_as_its_characters(tmp_path):
    """A README quoting a chat template must not put a document end or a turn marker inside the shards."""
    tok = train_bpe([EN] * 20, vocab_size=300, min_frequency=1)
    save_tokenizer(tok, tmp_path)
    text = "Prompt format: <|user|>hi<|end|><|assistant|> then <|eos|> and <|bos|>."
    specials = set(special_ids(tok).values())
    with ParallelEncoder(tmp_path / "tokenizer.json", np.uint16, (0, 1), workers=1) as enc:
        tokens, lengths = next(enc.encode([[text]]))
    assert not specials & set(tokens[1:-1].tolist()) and (tokens[0], tokens[-1]) == (0, 1)
    loaded = load_tokenizer(tmp_path / "tokenizer.json")
    for t in (tok, loaded):  # the trained tokenizer and a loaded one (generate, chat, eval) alike
        ids = t.encode(text, add_special_tokens=False).ids
        assert not specials & set(ids) and t.decode(ids, skip_special_tokens=True) == text


def test_every_document_in_the_shards_opens_with_bos_and_closes_with_eos(run):
    cfg, art = run
    summary = read_json(art["shards"].dir / "shards.json")
    tok = load_tokenizer(art["tokenizer"].dir / "tokenizer.json")
    opening, closing = document_wrap_ids(tok)
    assert (opening, closing) == (tok.token_to_id(BOS), tok.token_to_id(EOS))
    files = [("train", f) for name, info in summary["train"].items() for f in info["files"]]
    files += [("val", info["files"][0]) for info in summary["val"].values()]
    for split, name in files:
        shard = TokenShard(art["shards"].dir / split / name)
        starts = shard.docs[:, 0]
        ends = np.append(starts[1:], len(shard))
        assert (shard.tokens[starts] == opening).all() and (shard.tokens[ends - 1] == closing).all(), name
        inner = np.ones(len(shard), dtype=bool)
        inner[starts], inner[ends - 1] = False, False
        assert not np.isin(shard.tokens[inner], [opening, closing]).any(), name  # only at the ends
    texts = [d["text"] for d in read_jsonl(art["data"].dir / "val" / "code.jsonl")]
    assert summary["val"]["code"]["tokens"] == shard_tokens(tok, texts)  # the estimates' count is the shards'
    assert shard_tokens(tok, ["", ""]) == 2 * DOC_SPECIALS


def test_shards_split_load_memory_mapped_and_train_loader_reads_them(run):
    cfg, art = run
    summary = read_json(art["shards"].dir / "shards.json")
    tok = load_tokenizer(art["tokenizer"].dir / "tokenizer.json")
    web = summary["train"]["web"]
    assert len(web["files"]) > 1  # 4k-token shards: the web source is split
    shards = [TokenShard(art["shards"].dir / "train" / f) for f in web["files"]]
    assert sum(len(s) for s in shards) == web["tokens"]
    assert all(len(s) <= 4_000 or len(s.docs) == 1 for s in shards)  # only a document that alone is larger
    assert all(isinstance(s.tokens, np.memmap) for s in shards)
    first = next(read_jsonl(art["data"].dir / "train" / read_json(art["data"].dir / "stats.json")
                            ["train_files"]["web"][0]))
    want = [tok.token_to_id(BOS), *tok.encode(first["text"], add_special_tokens=False).ids, tok.token_to_id(EOS)]
    assert shards[0].tokens[:len(want)].tolist() == want
    assert sum(len(s.docs) for s in shards) == web["docs"]
    per_domain = summary["tokens_per_domain"]
    assert per_domain["web"]["train_tokens"] == web["tokens"] and per_domain["web"]["val_tokens"] > 0
    loader = MixtureLoader(art["shards"].dir, seq_len=32, batch_size=8, seed=1)
    x, y, _ = loader.batch(0)
    assert x.shape == (8, 32) and int(x.max()) < summary["vocab_size"]
    assert set(loader.epochs()) == {"code", "docs", "web"}


def test_fertility_section_and_sample_composition_are_recorded(run, tmp_path):
    cfg, art = run
    info = read_json(art["tokenizer"].dir / "tokenizer_info.json")
    fertility = read_json(art["tokenizer"].dir / "fertility.json")
    assert set(info["sample"]["domains"]) == {"code", "docs", "web"}
    assert info["sample"]["skipped"].get("in_validation_split", 0) == 0
    held_out = sum(1 for f in (art["data"].dir / "val").glob("*.jsonl") for _ in read_jsonl(f))
    assert fertility["overall"]["docs"] == held_out
    assert {"code", "docs", "web"} == set(fertility["domains"]) and "en" in fertility["languages"]
    shards = read_json(art["shards"].dir / "shards.json")
    md, js, plot = tokenizer_section(art["tokenizer"].dir, shards, tmp_path,
                                     lambda h, rows: "\n".join(" | ".join(map(str, r)) for r in [h, *rows]))
    text = "\n".join(md)
    assert "## Tokenizer" in text and "tokens/word" in text and "**warning**" in text and plot.exists()
    assert js["info"]["tokenizer_json_digest"] == shards["tokenizer_id"]  # named for what it is in the report


def test_training_refuses_shards_of_another_tokenizer(run, tmp_path):
    cfg, art = run
    shards = read_json(art["shards"].dir / "shards.json")
    check_tokenizer_matches(shards, art["tokenizer"].dir / "tokenizer.json", art["shards"].dir)
    save_tokenizer(train_bpe([EN, DE] * 20, vocab_size=cfg.tokenizer.vocab_size, min_frequency=1), tmp_path)
    with pytest.raises(UserError, match="is not the tokenizer the shards"):
        check_tokenizer_matches(shards, tmp_path / "tokenizer.json", art["shards"].dir)


def test_compare_prints_both_tokenizers_side_by_side(run, tmp_path, capsys):
    cfg, art = run
    save_tokenizer(train_bpe([EN, DE] * 20, vocab_size=300, min_frequency=1), tmp_path)
    a, b = art["tokenizer"].dir / "tokenizer.json", tmp_path / "tokenizer.json"
    plain = tmp_path / "notes.txt"
    plain.write_text(EN * 5)
    assert main(["tokenizer", "compare", str(a), str(b), "--text", str(art["data"].dir / "val"), str(plain)]) == 0
    out = capsys.readouterr().out
    assert f"A: {a.parent.name}" in out and f"B: {b.parent.name}" in out  # both files are tokenizer.json
    assert "Verdicts, A: " in out and "Verdicts, B: " in out
    assert "domain notes: tokens/word" in out and "domain web: chars/token" in out
    row = next(line for line in out.splitlines() if line.startswith("all: chars/token")).split()
    assert float(row[-2]) > float(row[-1])  # the tokenizer trained on the corpus compresses it better
    assert main(["tokenizer", "compare", str(a), "--text", str(tmp_path / "missing")]) == 2


def test_compare_gives_each_tokenizer_the_report_verdicts(tmp_path, capsys):
    from scratchlm.tokenizer.compare import column_labels

    for name, texts in (("english", [EN] * 40), ("both", [EN, DE] * 20)):
        (tmp_path / name).mkdir()
        save_tokenizer(train_bpe(texts, vocab_size=2000, min_frequency=1), tmp_path / name)
    (tmp_path / "text").mkdir()
    for lang, text in (("en", EN), ("de", DE)):  # documents and prose words enough for a firm verdict (>= 1,000)
        write_jsonl(tmp_path / "text" / f"{lang}.jsonl", [{"text": f"{i}. {text * 3}"} for i in range(30)])
    paths = [str(tmp_path / n / "tokenizer.json") for n in ("english", "both")]
    assert main(["tokenizer", "compare", *paths, "--text", str(tmp_path / "text")]) == 0
    out = capsys.readouterr().out
    english = out[out.index("Verdicts, A: english"):out.index("Verdicts, B: both")]
    both = out[out.index("Verdicts, B: both"):]
    assert "[warning] tokens/word de" in english and "[ok] tokens/word en" in english
    assert "[ok] tokens/word de" in both and "small sample" not in out
    assert column_labels(["x/run/tokenizer.json", "y/run/tokenizer.json"]) == ["x/run", "y/run"]
    assert column_labels(["a.json", "b/c.json"]) == ["a.json", "c.json"]


def test_report_data_tables_count_the_same_tokens_as_the_shards(run):
    from scratchlm.report.build import _table
    from scratchlm.report.data_section import data_section

    cfg, art = run
    data = read_json(art["data"].dir / "stats.json")
    shards = read_json(art["shards"].dir / "shards.json")
    md = "\n".join(data_section(data, shards, 10 ** 6, _table))

    def rows(after: str) -> list[list[str]]:
        lines = md[md.index(after):].splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("| "))
        table = []
        for line in lines[start + 2:]:
            if not line.startswith("| "):
                return table
            table.append([c.strip() for c in line.strip("|").split("|")])
        return table

    def out(cell: str) -> int:
        return int(cell.split("→")[1].replace(",", ""))

    total = sum(v["tokens"] for v in shards["train"].values())
    per_domain = sum(out(r[4]) for r in rows("### Per domain") if r[1] == "split")
    per_source = sum(out(next(r for r in rows(f"### Source `{name}`") if r[0] == "split")[6])
                     for name in shards["train"])
    source_table = rows("### Per source")
    assert per_domain == per_source == total == sum(int(r[7].replace(",", "")) for r in source_table)
    assert [int(r[6].replace(",", "")) for r in source_table] == [shards["train"][r[0]]["chars"] for r in source_table]
    assert "est." not in md.split("### Dedup clusters")[0]
    estimated = "\n".join(data_section(data, None, None, _table))  # before the shards exist: labelled estimates
    assert "est. " in estimated.split("### Per domain")[1].split("### Dedup clusters")[0]
