"""The corpus pipeline of the prepare stage: every step's accounting, the filters firing on the documents they
target, caching by step, resumption, parallel == serial, and the audit commands."""
import json
import random
import shutil

import pytest

from scratchlm.cli import main
from scratchlm.config import config_from_dict
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.prepare import prepare_data
from scratchlm.stages import size_estimate
from scratchlm.errors import UserError

SENTENCES = [
    "The committee met on Tuesday to review the budget for the coming year.",
    "Members discussed how the {t} could extend its opening hours without hiring more staff.",
    "Several residents had written letters asking for weekend access to the {t}.",
    "The treasurer explained that heating costs have risen sharply since last winter.",
    "After a long debate they agreed to run a three month trial and to report back in spring.",
    "Local children often visit the {t} with their teachers on Friday afternoons.",
    "A small grant from the regional council paid for new windows and a ramp at the entrance.",
    "Some older neighbours remember when the {t} was still painted green and had a wooden fence.",
    "Volunteers counted the visitors every evening and wrote the numbers into a notebook.",
    "The mayor said that the town should be proud of what the volunteers have achieved.",
    "Nobody expected the storm in March, which flooded the cellar and ruined several boxes of records.",
    "Insurance covered most of the damage, but the repairs took almost two months.",
    "A photographer from the newspaper came to take pictures of the reopening ceremony.",
    "Visitors from the next valley now travel by bus to see the {t} on summer weekends.",
    "The school wants to use the building for an exhibition about the history of the region.",
    "In the end everyone agreed that the money had been spent well and that the plan should continue.",
]
TOPICS = ["river", "bridge", "orchard", "harbour", "railway", "bakery", "museum", "garden", "school", "market",
          "forest", "castle"]
GERMAN = ("Der Ausschuss traf sich am Dienstag, um den Haushalt für das kommende Jahr zu prüfen. Die Mitglieder "
          "diskutierten, wie die Bibliothek ihre Öffnungszeiten verlängern könnte, ohne mehr Personal "
          "einzustellen, und ob Freiwillige bei den Abendschichten helfen könnten. Mehrere Anwohner hatten "
          "Briefe geschrieben und um Zugang zum Lesesaal am Wochenende gebeten. Nach langer Debatte stimmte der "
          "Ausschuss einem dreimonatigen Versuch zu und wird im Frühjahr berichten.")
PROMO = ("BEST DEALS! Buy now and save 50% off! Limited time offer, free shipping on every order! Click here to "
         "get yours today! Amazing prices, exclusive discounts, guaranteed satisfaction! Shop now! Don't miss "
         "out! Only $9.99! Order today! Sign up for our newsletter and get a free gift! Hurry, act now! The "
         "finest products with the lowest prices, and the best bargains to be found anywhere in the world!")
CODE = '''def scale_{i}(values, factor={i}):
    """Multiply every value by factor and drop the negative results."""
    result = []
    for value in values:
        scaled = value * factor + {i}
        if scaled >= 0:
            result.append(scaled)
    return result


class Counter{i}:
    def __init__(self, start={i}):
        self.count = start

    def bump(self, step=1):
        self.count += step
        return self.count
'''


def _story(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    picked = random.Random(i).sample(SENTENCES, 7)  # pairs share ~3 sentences: related, not near-duplicates
    return f"A story about the {topic}, number {i}. " + " ".join(x.format(t=topic) for x in picked)


def _write_corpus(tmp_path):
    web = [_story(i) for i in range(12)]
    web.append(_story(3))  # exact duplicate
    web.append(_story(4).replace("A story about", "Here is a story about"))  # near duplicate
    web += [GERMAN, PROMO, "too short"]
    lines = [json.dumps({"text": t}) for t in web] + ["{not json"]
    (tmp_path / "web.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "code").mkdir()
    for i in range(6):
        (tmp_path / "code" / f"m{i}.py").write_text(CODE.format(i=i))
    return {"web": "web.jsonl", "code": "code"}


def _config(tmp_path, **data):
    paths = _write_corpus(tmp_path)
    cfg = config_from_dict({
        "data": {"sources": [{"name": "web", "domain": "web", "path": paths["web"]},
                             {"name": "code", "domain": "code", "path": paths["code"], "format": "text"}],
                 "min_chars": 100, "workers": 1, "val_fraction": 0.1, "val_min_docs": 1, **data},
        "tokenizer": {"vocab_size": 300}, "model": {"n_layer": 1, "d_model": 16, "n_head": 2, "seq_len": 16}})
    cfg.path = tmp_path / "c.toml"
    return cfg


def _prepare(cfg, name="out"):
    out = cfg.base_dir / name
    out.mkdir(exist_ok=True)
    return out, prepare_data(cfg, out, size_estimate(cfg))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    cfg = _config(tmp)
    out, stats = _prepare(cfg)
    return cfg, out, stats


def _ledger(out):
    return [r for p in sorted(out.glob("rejected-*.jsonl.zst")) for r in read_jsonl(p)]


def test_every_step_accounts_for_every_document(prepared):
    cfg, out, stats = prepared
    ledger = _ledger(out)
    for name, s in stats["sources"].items():
        steps = [st for st in s["steps"].values() if "skipped" not in st]
        for st in steps:
            assert st["docs_in"] == st["docs_out"] + sum(st["dropped"].values()) + sum(st["diverted"].values())
        for before, after in zip(steps, steps[1:]):
            assert after["docs_in"] == before["docs_out"]
        dropped_docs = [r for r in ledger if r["source"] == name and r["level"] == "document"]
        assert len(dropped_docs) == sum(s["dropped"].values())
        assert s["docs_in"] == s["train"]["docs"] + sum(s["steps"]["split"]["diverted"].values()) + len(dropped_docs)
    assert stats["sources"]["web"]["docs_in"] == 18 and stats["sources"]["code"]["docs_in"] == 6
    train = [d for f in (out / "train").glob("*.zst") for d in read_jsonl(f)]
    val = [d for f in (out / "val").glob("*.jsonl") for d in read_jsonl(f)]
    # a held-out tail is extra text of a document that stays in training, not a document of its own
    whole = [d for d in val if "split_from" not in d]
    assert len(train) + len(whole) == sum(s["docs_kept"] for s in stats["sources"].values())
    assert {d["split_from"] for d in val if "split_from" in d} <= {d["id"] for d in train}


def test_each_filter_fires_on_what_it_targets(prepared):
    _, out, stats = prepared
    rule_of = {r["id"]: r["rule"] for r in _ledger(out) if r["level"] == "document"}
    assert rule_of["web/web.jsonl:13"] == "exact_duplicate"
    assert rule_of["web/web.jsonl:14"] == "near_duplicate"
    assert rule_of["web/web.jsonl:15"] == "language"
    assert rule_of["web/web.jsonl:16"] == "promotional"
    assert rule_of["web/web.jsonl:17"] == "too_short"
    assert rule_of["web/web.jsonl:18"] == "malformed_json"
    web = stats["sources"]["web"]
    assert web["languages"]["de"] == 1 and web["languages"]["en"] >= 12
    assert web["promo"]["promotional"] == 1
    assert stats["dedup"]["exact"]["clusters"] == 1 and stats["dedup"]["fuzzy"]["duplicates"] == 1
    assert stats["dedup"]["fuzzy"]["examples"][0]["kept"] == "web/web.jsonl:5"


def test_code_source_skips_prose_steps_and_survives(prepared):
    _, _, stats = prepared
    code = stats["sources"]["code"]
    assert "skipped" in code["steps"]["language"] and "skipped" in code["steps"]["boilerplate"]
    assert code["steps"]["quality"]["docs_out"] == code["steps"]["quality"]["docs_in"] == 6


def test_toggling_a_late_filter_reuses_earlier_steps(prepared):
    cfg, _, first = prepared
    assert all(n == 0 for n in first["cache"].values())
    cfg.data.promo_threshold = 0.99
    _, again = _prepare(cfg, "again")
    cached = again["cache"]
    assert cached["read"] == 2 and cached["language"] == 1 and cached["quality"] == 2 and cached["promo"] == 0
    assert again["sources"]["web"]["promo"]["promotional"] == 0
    cfg.data.promo_threshold = 0.5


def test_a_killed_prepare_redoes_only_unfinished_units(prepared):
    cfg, _, stats = prepared
    quality_dirs = [u["steps"]["quality"] for u in stats["units"].values()]
    shutil.rmtree(quality_dirs[0])  # as if the worker had died before its atomic rename
    _, again = _prepare(cfg, "resumed")
    assert again["cache"]["quality"] == len(quality_dirs) - 1 and again["cache"]["read"] == 2
    assert again["sources"]["web"]["train"] == stats["sources"]["web"]["train"]
    assert again["sources"]["code"]["steps"] == stats["sources"]["code"]["steps"]


def test_parallel_matches_serial(tmp_path, prepared):
    _, out, stats = prepared
    cfg = _config(tmp_path, workers=2, unit_mb=1)
    out2, stats2 = _prepare(cfg)
    docs = lambda o: sorted((d["id"], d["text"]) for f in (o / "train").glob("*.zst") for d in read_jsonl(f))
    assert docs(out2) == docs(out)
    assert stats2["sources"]["web"]["dropped"] == stats["sources"]["web"]["dropped"]


def test_unreadable_source_is_one_error(tmp_path):
    (tmp_path / "bad.jsonl").write_text("{nope\n{also not json\n")
    cfg = config_from_dict({"data": {"sources": [{"name": "forum", "domain": "web", "path": "bad.jsonl"}],
                                     "workers": 1}})
    cfg.path = tmp_path / "c.toml"
    with pytest.raises(UserError, match=r"source `forum`.*none of its 2 documents.*malformed_json \(2 of 2\)"):
        _prepare(cfg)


def test_audit_commands(prepared):
    _, out, _ = prepared
    from scratchlm.data.audit import explain, rejected

    text = rejected(out, "language", None, 5)
    assert text.startswith("1 records for rule `language`") and "web/web.jsonl:15" in text and "de" in text
    trace = explain(out, "web/web.jsonl:14")
    assert "read            kept" in trace and "dedup           dropped: near_duplicate" in trace
    assert "language" not in trace  # copies go before any filter sees them
    trace = explain(out, "web/web.jsonl:15")
    assert "dedup           kept" in trace and "language        dropped: language" in trace
    with pytest.raises(UserError, match="no ledger record with rule `nope`"):
        rejected(out, "nope", None, 5)


def test_cli_subcommands(tmp_path, capsys):
    _write_corpus(tmp_path)
    (tmp_path / "c.toml").write_text('[data]\nmin_chars = 100\nworkers = 1\n[[data.sources]]\nname = "web"\n'
                                     'domain = "web"\npath = "web.jsonl"\n')
    assert main(["data", "prepare", "-c", str(tmp_path / "c.toml")]) == 0
    capsys.readouterr()
    assert main(["data", "rejected", "-c", str(tmp_path / "c.toml"), "--rule", "promotional", "--sample", "1"]) == 0
    assert "web/web.jsonl:16" in capsys.readouterr().out
    assert main(["data", "explain", "-c", str(tmp_path / "c.toml"), "web/web.jsonl:13"]) == 0
    assert "exact_duplicate" in capsys.readouterr().out


def test_a_big_jsonl_cut_into_units_reads_the_same_documents(tmp_path):
    from scratchlm.data.readers import read_jsonl_file
    from scratchlm.data.units import _line_cuts

    rows = [json.dumps({"text": f"line {i} " + "x" * (i % 37)}) for i in range(500)]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(rows) + "\n")
    whole = [(d["id"], d["text"]) for d in read_jsonl_file(path, "s/big.jsonl", "text")]
    cuts = _line_cuts(path, path.stat().st_size, unit_bytes=1000)
    assert len(cuts) > 10 and cuts[0][0] == 0 and cuts[-1][1] == -1
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))  # contiguous, no byte read twice
    pieces = [(d["id"], d["text"]) for start, end, first in cuts
              for d in read_jsonl_file(path, "s/big.jsonl", "text", start, end, first)]
    assert pieces == whole and whole[499][0] == "s/big.jsonl:500"


def test_per_source_languages_override_the_default(tmp_path):
    (tmp_path / "mixed.jsonl").write_text(json.dumps({"text": GERMAN}) + "\n" + json.dumps({"text": _story(1)}) + "\n")
    cfg = config_from_dict({"data": {"sources": [{"name": "de", "domain": "web", "path": "mixed.jsonl",
                                                  "languages": ["de"]}],
                                     "workers": 1, "min_chars": 100,
                                     "skip": ["quality", "promo", "fuzzy_dedup", "paragraph_dedup"]},
                            "tokenizer": {"vocab_size": 300},
                            "model": {"n_layer": 1, "d_model": 16, "n_head": 2, "seq_len": 16}})
    cfg.path = tmp_path / "c.toml"
    _, stats = _prepare(cfg)
    lang = stats["sources"]["de"]["steps"]["language"]
    assert lang["docs_out"] == 1 and lang["dropped"] == {"language": 1} and lang["notes"]["language_out"] == {"de": 1}


def test_a_step_that_eats_most_of_a_source_is_a_warning_with_the_fix():
    from scratchlm.data.prepare_stats import filter_warnings

    def step(chars_in, chars_out, **extra):
        return {"docs_in": 10, "docs_out": 1, "chars_in": chars_in, "chars_out": chars_out, **extra}

    manifest = {"sources": {
        "nl": {"profile": "prose", "steps": {
            "read": step(1000, 1000),
            "language": step(1000, 100, dropped={"language": 9}, notes={"language_in": {"nl": 9, "en": 1}})}},
        "manual": {"profile": "prose", "steps": {
            "quality": step(1000, 300, dropped={"c4_curly_braces": 4}, removed={"c4_line": {"pieces": 80}}),
            "split": step(300, 30)}},
        "code": {"profile": "code", "steps": {"language": {"skipped": "not run on code sources"},
                                              "quality": step(1000, 600)}}}}
    warnings = filter_warnings(manifest, {"nl": ["en"], "manual": ["en"], "code": ["en"]})
    assert len(warnings) == 2  # the validation split and steps under half are not warnings
    assert "source `nl`: the language step removed 90%" in warnings[0] and "nl 9, en 1" in warnings[0]
    assert "set `languages`" in warnings[0]
    assert "c4_line (80), c4_curly_braces (4)" in warnings[1] and 'profile = "technical"' in warnings[1]


def test_rejected_names_an_unknown_source(prepared):
    _, out, _ = prepared
    from scratchlm.data.audit import rejected

    with pytest.raises(UserError, match=r"no source `wbe` in this config; did you mean `web`\? sources: code, web"):
        rejected(out, None, "wbe", 5)
    assert rejected(out, None, "web", 5).startswith("6 records in `web`")


def test_explain_leads_with_one_line_per_step(prepared):
    _, out, _ = prepared
    from scratchlm.data.audit import explain

    text = explain(out, "web/web.jsonl:15")
    head, steps = text.split("\n")[0], text.split("Steps:\n")[1].split("\n\n")[0].splitlines()
    assert head == "web/web.jsonl:15 (source web, work unit web-00000): dropped at step language by rule `language`"
    assert [line.split()[0] for line in steps] == ["read", "dedup", "boilerplate", "repeated_lines", "language"]
    assert steps[-1].split()[1:3] == ["dropped:", "language"]
    assert "Ledger records (1):" in text
    kept = next(d["id"] for f in (out / "train").glob("web*.zst") for d in read_jsonl(f))
    text = explain(out, kept)
    assert ": kept for training" in text.split("\n")[0] and f"scratchlm data show -c CONFIG {kept}" in text
    assert all(" kept, " in line for line in text.split("Steps:\n")[1].split("\n\n")[0].splitlines())


def test_show_prints_the_final_text_or_names_the_id(prepared):
    cfg, out, _ = prepared
    from scratchlm.data.audit import show

    train = {d["id"]: d for f in (out / "train").glob("web*.zst") for d in read_jsonl(f)}
    doc_id, doc = next(iter(train.items()))
    text = show(out, out, doc_id)
    assert text.splitlines()[0] == f"== {doc_id} | source web | train | {len(doc['text']):,} chars, " \
                                   f"{doc['text'].count(chr(10)) + 1} lines =="
    assert text.split("\n", 1)[1] == doc["text"]
    val = next(d for d in read_jsonl(out / "val" / "web.jsonl"))
    assert f"| validation | {len(val['text']):,} chars" in show(out, out, val["id"])
    with pytest.raises(UserError, match=r"web/web.jsonl:15` did not reach training: dropped at language"):
        show(out, out, "web/web.jsonl:15")
    with pytest.raises(UserError, match=r"no document `web/web.jsonl:999` in source `web`; did you mean `web/web"):
        show(out, out, "web/web.jsonl:999")
    with pytest.raises(UserError, match=r"`wbe/web.jsonl:1` is not in any source.*did you mean `web/web.jsonl`"):
        show(out, out, "wbe/web.jsonl:1")


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    import subprocess
    import sys

    _write_corpus(tmp_path)
    (tmp_path / "c.toml").write_text('[data]\nmin_chars = 100\nworkers = 1\n[[data.sources]]\nname = "web"\n'
                                     'domain = "web"\npath = "web.jsonl"\n')
    assert main(["data", "prepare", "-c", str(tmp_path / "c.toml")]) == 0
    for argv in (["data", "rejected", "-c", str(tmp_path / "c.toml"), "--sample", "50"],
                 ["data", "explain", "-c", str(tmp_path / "c.toml"), "web/web.jsonl:1"]):
        # `scratchlm ... | head -1` with the reader gone before the first write: every write meets a closed pipe
        proc = subprocess.Popen([sys.executable, "-m", "scratchlm", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=tmp_path)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait() == 141, err
        assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err
