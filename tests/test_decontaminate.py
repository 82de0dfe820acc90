"""Tests of decontamination's n-gram scan, on real text: pydoc topics paragraphs as eval items, stdlib .py files
as training documents."""

from __future__ import annotations

import gzip
import json
import random
import re
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import zstandard
from pydoc_data.topics import topics

from scratchlm.data.dedup.words import ngram_polynomial, normalize_words, word_spans
from scratchlm.decontaminate.check import check_files
from scratchlm.decontaminate.corpus_scan import scan_corpus
from scratchlm.decontaminate.cut import remove_matches
from scratchlm.decontaminate.files import iter_train_documents, load_eval_set
from scratchlm.data.dedup.fingerprint import HASH_SCHEME, text_words
from scratchlm.data.dedup.ngram_index import INDEX_FORMAT, ContaminationIndex
from scratchlm.decontaminate.report import ContaminationReport
from scratchlm.data.dedup.ngram_scan import scan_document, scan_texts
from scratchlm.errors import UserError

STDLIB = Path(sysconfig.get_paths()["stdlib"])
TRAIN_FILES = ["json/decoder.py", "json/encoder.py", "csv.py", "textwrap.py", "string.py", "heapq.py", "bisect.py",
               "fnmatch.py", "glob.py", "shlex.py", "calendar.py", "fractions.py", "statistics.py", "queue.py",
               "sched.py", "colorsys.py", "difflib.py", "base64.py", "getopt.py", "optparse.py"]


def prose_paragraphs(topic: str) -> list[str]:
    return [p for p in re.split(r"\n[ \t]*\n", topics[topic])
            if not p.startswith(" ") and len(text_words(p)) >= 20]


@pytest.fixture(scope="module")
def eval_items() -> list[tuple[str, str, str]]:
    # Topics repeat sentences ("for" and "while" explain "break" alike): keep paragraphs that share no 13-gram
    # with one kept before, so each planted copy has exactly one right answer.
    items, seen = [], set()
    for topic in ("assert", "for", "while", "with", "lambda", "pass", "global", "del"):
        for k, p in enumerate(prose_paragraphs(topic)[:3]):
            grams = ngrams(p)
            if not grams & seen:
                items.append(("topics", f"{topic}/{k}", p))
                seen |= grams
    return items


def ngrams(text: str, n: int = 13) -> set[str]:
    words = text_words(text)
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


@pytest.fixture(scope="module")
def index(eval_items) -> ContaminationIndex:
    return ContaminationIndex.build(eval_items, n=13)


@pytest.fixture(scope="module")
def train_docs() -> list[dict]:
    return [{"id": f"py:{rel}", "source": "stdlib", "domain": "code", "text": (STDLIB / rel).read_text(),
             "license": "PSF"} for rel in TRAIN_FILES]


def exact_reference(text: str, item_text: str, n: int = 13) -> bool:
    """Independent check: does text hold one of item_text's normalized n-grams (plain strings, no hashing)?"""
    words, grams = text_words(text), ngrams(item_text, n)
    return any(" ".join(words[i:i + n]) in grams for i in range(len(words) - n + 1))


def plant(host: str, insert: str) -> str:
    lines = host.splitlines(keepends=True)
    middle = len(lines) // 2
    return "".join(lines[:middle]) + insert + "\n" + "".join(lines[middle:])


def found_items(index, text) -> set[str]:
    return {m.item_id for m in scan_document(index, text)}


# --- normalization --------------------------------------------------------------------------------------------


def test_text_words_are_unicode_aware():
    assert text_words("Hello,   WORLD!\n\tit's a_b") == ["hello", "world", "it", "s", "a", "b"]
    # Combining marks stay inside their word; non-Latin scripts and accented capitals are lowercased.
    assert text_words("cafe\u0301 — ÉLAN «हिन्दी»") == ["cafe\u0301", "élan", "हिन्दी"]
    assert text_words("...  ,;") == []


def test_text_words_keep_offsets_where_dedup_words_fold():
    # Decontamination cuts matches out of the original text, so its words are stretches of it; dedup's are folded
    # (NFKC, one word per CJK character, format characters inside words). Both rules live in one function.
    text = "ＡＢＣ ﬁle 中文 zw\u200bj İx"
    assert text_words(text) == normalize_words(text, keep_offsets=True) == ["ａｂｃ", "ﬁle", "中文", "zw", "j", "i̇x"]
    assert [text[s:e] for s, e in word_spans(text)] == ["ＡＢＣ", "ﬁle", "中文", "zw", "j", "İx"]
    assert normalize_words(text) == ["abc", "file", "中", "文", "zw\u200bj", "i̇x"]


def test_windows_are_the_spans_of_the_shared_polynomial():
    polynomial = ngram_polynomial(0x9E3779B97F4A7C15)
    prefix = polynomial.prefix_sums(np.arange(1, 40, dtype=np.uint64) * np.uint64(0x1234567))
    starts = np.arange(len(prefix) - 13)
    assert np.array_equal(polynomial.window_hashes(prefix, 13), polynomial.span_hashes(prefix, starts, starts + 13))
    assert len(polynomial.window_hashes(prefix, len(prefix))) == 0


# --- planted kinds --------------------------------------------------------------------------------------------


def test_clean_corpus_has_no_hits(index, eval_items, train_docs):
    for doc in train_docs:
        assert not any(exact_reference(doc["text"], text) for _, _, text in eval_items), doc["id"]
        assert scan_document(index, doc["text"]) == [], doc["id"]


def test_verbatim_copy_is_found(index, eval_items, train_docs):
    for (_, item_id, text), doc in zip(eval_items, train_docs):
        matches = scan_document(index, plant(doc["text"], text))
        assert {m.item_id for m in matches} == {item_id}
        # The match covers the whole planted item, in words and in characters.
        (m,) = matches
        assert m.word_end - m.word_start == len(text_words(text))
        assert text_words(plant(doc["text"], text)[m.char_start:m.char_end]) == text_words(text)


def noisy(text: str, rng: random.Random) -> str:
    out = []
    for token in re.findall(r"\w+|\W+", text):
        if token[0].isalnum():
            out.append(rng.choice([str.upper, str.title, str.swapcase, str.lower])(token))
        else:
            punct = "".join(c for c in token if not c.isspace() and rng.random() < 0.5)
            out.append(punct + rng.choice([",", "", ";", "!"]) + rng.choice([" ", "\n", "\t  ", "   "]))
    return "".join(out)


def test_case_whitespace_punctuation_changes_are_found(index, eval_items, train_docs):
    rng = random.Random(1)
    for (_, item_id, text), doc in zip(eval_items, train_docs):
        changed = noisy(text, rng)
        assert changed != text
        assert found_items(index, plant(doc["text"], changed)) == {item_id}


def test_partial_copy_inside_longer_document_is_found(train_docs):
    # Eval items of two paragraphs; only one paragraph is planted, in a long unrelated document.
    paras = prose_paragraphs("for")[:2] + prose_paragraphs("while")[:2]
    items = [("topics", "for", paras[0] + "\n\n" + paras[1]), ("topics", "while", paras[2] + "\n\n" + paras[3])]
    index = ContaminationIndex.build(items)
    host = train_docs[-1]["text"]  # optparse.py, ~60 kB
    assert found_items(index, plant(host, paras[1])) == {"for"}
    assert found_items(index, plant(host, paras[2])) == {"while"}


def test_paraphrase_detection_matches_exact_reference(index, eval_items, train_docs):
    """10% of words changed: found exactly when an untouched 13-gram survives (measured, not a recall target)."""
    rng = random.Random(2)
    vocabulary = sorted({w for _, _, t in eval_items for w in text_words(t)})
    found = 0
    for (_, item_id, text), doc in zip(eval_items, train_docs):
        tokens = re.findall(r"\w+|\W+", text)
        words = [i for i, t in enumerate(tokens) if t[0].isalnum()]
        for i in rng.sample(words, round(0.1 * len(words))):
            tokens[i] = rng.choice([w for w in vocabulary if w != tokens[i].lower()])
        planted = plant(doc["text"], "".join(tokens))
        detected = item_id in found_items(index, planted)
        assert detected == exact_reference(planted, text)
        found += detected
    print(f"paraphrase (10% words changed): {found}/{len(train_docs)} found")


# --- short items ----------------------------------------------------------------------------------------------


def test_short_item_rule():
    nine = "never raise a bare exception from inside the handler"  # 9 words: fingerprinted whole
    five = "call the cleanup hook early"  # 5 words: too short to check
    items = [("s", "nine", nine), ("s", "five", five)]
    index = ContaminationIndex.build(items, n=13, min_words=8)
    assert sorted(index.fingerprints) == [9]
    assert index.item_checked.tolist() == [True, False]

    assert found_items(index, "Rule one: NEVER raise a bare exception, from inside the handler! Done.") == {"nine"}
    (m,) = scan_document(index, f"x y {nine} z")
    assert (m.word_start, m.word_end) == (2, 11)
    # Eight of the nine words, or the nine words with one in between, are not the item.
    assert found_items(index, "never raise a bare exception from inside the") == set()
    assert found_items(index, "never raise a bare exception from deep inside the handler") == set()
    assert found_items(index, f"{five} {five}") == set()

    docs = [{"id": "d", "source": "t", "domain": "t", "text": f"{nine}. {five}."}]
    report = scan_corpus(index, docs)
    assert report.docs_dropped == 1
    s = report.to_dict()["eval_sets"]["s"]
    assert (s["items"], s["too_short_to_check"], s["checked"], s["contaminated_items"]) == (2, 1, 1, ["nine"])


def test_short_item_does_not_match_inside_longer_window(eval_items):
    # A short item's fingerprint is salted with its length: a long item that contains it does not hit it.
    long_text = eval_items[0][2]
    short = " ".join(text_words(long_text)[:10])
    index = ContaminationIndex.build([("s", "short", short)])
    assert found_items(index, long_text) == {"short"}  # its 10 words really are in there
    assert found_items(index, " ".join(text_words(long_text)[1:])) == set()


# --- removal --------------------------------------------------------------------------------------------------


def test_span_mode_cuts_match_and_keeps_the_rest(index, eval_items, train_docs):
    _, item_id, text = eval_items[0]
    host = train_docs[0]["text"]
    doc_text = host[:3000] + "\n" + text + "\n" + host[3000:]
    matches = scan_document(index, doc_text)
    result = remove_matches(doc_text, matches, mode="span", span_window=200)
    start, end = matches[0].char_start, matches[0].char_end
    assert result.kept == [doc_text[:start - 200], doc_text[end + 200:]]
    assert result.removed_spans == [(start - 200, end + 200)]
    assert result.removed_chars == end - start + 400
    assert not any(exact_reference(piece, text) for piece in result.kept)

    # Pieces shorter than min_piece_chars are removed too; document mode drops everything.
    first = doc_text[:start - 200]
    short = remove_matches(doc_text, matches, mode="span", span_window=200, min_piece_chars=len(first.strip()) + 1)
    assert short.kept == [doc_text[end + 200:]]
    assert short.removed_spans == [(0, end + 200)] and short.removed_chars == end + 200
    whole = remove_matches(doc_text, matches, mode="document")
    assert whole.kept == [] and whole.removed_chars == len(doc_text)
    assert remove_matches(doc_text, [], mode="span").kept == [doc_text]
    with pytest.raises(UserError, match="mode"):
        remove_matches(doc_text, matches, mode="paragraph")


def scan_with_removals(index, docs, **options) -> tuple[list[tuple], ContaminationReport]:
    """scan_corpus's report and every (document, matches, result) it passed to on_removal, in order."""
    removals = []
    report = scan_corpus(index, docs, on_removal=lambda *removal: removals.append(removal), **options)
    return removals, report


def test_scan_corpus_modes_and_removals(index, eval_items, train_docs):
    docs = [dict(d) for d in train_docs[:6]]
    docs[2]["text"] = docs[2]["text"][:2000] + "\n" + eval_items[3][2] + "\n" + docs[2]["text"][2000:]

    removals, report = scan_with_removals(index, docs, mode="document")
    ((doc, matches, result),) = removals  # only the touched document, as it was given
    assert doc is docs[2] and {m.item_id for m in matches} == {eval_items[3][1]} and result.kept == []
    assert report.docs_scanned == 6 and report.docs_dropped == 1 and report.chars_removed == len(docs[2]["text"])

    removals, report = scan_with_removals(index, docs, mode="span")
    ((doc, _, result),) = removals
    assert doc is docs[2] and len(result.kept) == 2
    assert sum(len(p) for p in result.kept) + report.chars_removed == len(docs[2]["text"])
    assert report.docs_dropped == 0 and report.docs_touched == 1


def test_two_workers_give_the_same_result(index, eval_items, train_docs):
    docs = [dict(d) for d in train_docs]
    for k in (1, 7, 12):
        docs[k]["text"] = plant(docs[k]["text"], eval_items[k][2])
    one, report_one = scan_with_removals(index, docs, mode="span", workers=1, chunk_docs=3)
    two, report_two = scan_with_removals(index, docs, mode="span", workers=2, chunk_docs=3)
    assert one == two
    assert report_one.to_dict() == report_two.to_dict()
    assert report_one.to_dict()["eval_sets"]["topics"]["contaminated_items"] == sorted(
        eval_items[k][1] for k in (1, 7, 12))


# --- the saved index ------------------------------------------------------------------------------------------


def test_saved_index_holds_the_fingerprints_and_their_scheme(tmp_path, index):
    path = tmp_path / "eval.index"
    index.save(path)
    assert path.exists()  # the exact name: numpy must not add ".npz"
    lengths = sorted(index.fingerprints)
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(data["meta"].tobytes().decode())
        assert (meta["format"], meta["hash_scheme"]) == (INDEX_FORMAT, HASH_SCHEME)
        assert (meta["n"], meta["min_words"], meta["set_names"], meta["item_ids"], meta["content_id"]) == (
            index.n, index.min_words, index.set_names, index.item_ids, index.content_id)
        assert data["window_lengths"].tolist() == lengths
        assert data["lengths"].tolist() == [len(index.fingerprints[k]) for k in lengths]
        assert np.array_equal(data["fingerprints"], np.concatenate([index.fingerprints[k] for k in lengths]))
        assert np.array_equal(data["fingerprint_items"],
                              np.concatenate([index.fingerprint_items[k] for k in lengths]))
        assert np.array_equal(data["item_sets"], index.item_sets)
        assert np.array_equal(data["item_checked"], index.item_checked)


# --- eval set files -------------------------------------------------------------------------------------------


def test_load_eval_set_formats(tmp_path):
    jsonl = tmp_path / "he.jsonl"
    jsonl.write_text(json.dumps({"task_id": "HE/0", "prompt": "def f():", "canonical_solution": "  return 1"}) + "\n"
                     + "\n" + json.dumps({"task_id": "HE/1", "prompt": "def g():", "test": "assert g()"}) + "\n")
    assert load_eval_set("he", jsonl) == [("he", "HE/0", "def f():\n  return 1"), ("he", "HE/1", "def g():")]
    assert load_eval_set("he", jsonl, fields=["prompt"])[0] == ("he", "HE/0", "def f():")

    texts = tmp_path / "t.jsonl"
    texts.write_text('{"text": "alpha", "prompt": "ignored"}\n{"text": "beta"}\n')
    assert load_eval_set("t", texts) == [("t", "line1", "alpha"), ("t", "line2", "beta")]

    plain = tmp_path / "qa.txt"
    plain.write_text("First paragraph\nstill first.\n\n  \nSecond one.\n\n\n")
    assert load_eval_set("qa", plain) == [("qa", "para0", "First paragraph\nstill first."),
                                          ("qa", "para1", "Second one.")]
    plain.write_bytes(b"First paragraph\r\nstill first.\r\n\r\nSecond one.\r\n")  # Windows line ends
    assert [text for _, _, text in load_eval_set("qa", plain)] == ["First paragraph\nstill first.", "Second one."]

    packed = tmp_path / "z.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(b'{"question": "why?", "answer": "because"}\n'))
    assert load_eval_set("z", packed) == [("z", "line1", "why?\nbecause")]


def test_bad_eval_files_raise_user_errors(tmp_path):
    with pytest.raises(UserError, match="missing.jsonl.*not found"):
        load_eval_set("m", tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(UserError, match="empty.txt.*empty"):
        load_eval_set("e", empty)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n\n")
    with pytest.raises(UserError, match="blank.txt.*no text"):
        load_eval_set("b", blank)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "fine"}\n{"text": oops}\n')
    with pytest.raises(UserError, match=r"broken.jsonl:2: malformed JSON"):
        load_eval_set("b", broken)
    listy = tmp_path / "listy.jsonl"
    listy.write_text('["a"]\n')
    with pytest.raises(UserError, match=r"listy.jsonl:1: expected a JSON object"):
        load_eval_set("l", listy)
    nofield = tmp_path / "nofield.jsonl"
    nofield.write_text('{"question": "q?"}\n')
    with pytest.raises(UserError, match=r"nofield.jsonl:1: .*input"):
        load_eval_set("n", nofield, fields=["input"])
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"body": "q?"}\n')
    with pytest.raises(UserError, match=r"unknown.jsonl:1: record has no text field"):
        load_eval_set("u", unknown)
    for name, data in (("bad.jsonl.gz", b"not gzip"), ("bad.jsonl.zst", b"not zstd"), ("latin.txt", b"caf\xe9")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(UserError, match=f"{name}: cannot read"):
            load_eval_set("x", tmp_path / name)
    hollow = tmp_path / "hollow.jsonl"
    hollow.write_text('{"text": ""}\n{"text": "  "}\n')
    with pytest.raises(UserError, match=r"hollow.jsonl: no text"):
        load_eval_set("h", hollow)


# --- standalone command and report ----------------------------------------------------------------------------


def test_command_reports_and_leaves_eval_set_untouched(tmp_path, eval_items, train_docs):
    eval_path = tmp_path / "topics.jsonl"
    eval_path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for _, i, t in eval_items))
    before = (eval_path.read_bytes(), eval_path.stat().st_mtime_ns)
    items_before = list(eval_items)

    planted = {"for/0": train_docs[3]["id"], "with/1": train_docs[9]["id"]}
    texts = {i: t for _, i, t in eval_items}
    item_in = {doc_id: item for item, doc_id in planted.items()}
    docs = [{**d, "text": plant(d["text"], texts[item_in[d["id"]]])} if d["id"] in item_in else d for d in train_docs]
    half = len(docs) // 2
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(d) + "\n" for d in docs[:half])
    with open(tmp_path / "b.jsonl.zst", "wb") as f:  # one zstd frame per document, as parallel compressors write
        f.writelines(zstandard.ZstdCompressor().compress((json.dumps(d) + "\n").encode()) for d in docs[half:])
    (tmp_path / "c.txt").write_text("A plain text file.\n" + texts["del/0"] + "\nThe end.\n")

    report = check_files([str(tmp_path / n) for n in ("a.jsonl.gz", "b.jsonl.zst", "c.txt")],
                         [str(eval_path)], ngram=13, workers=2)
    assert (eval_path.read_bytes(), eval_path.stat().st_mtime_ns) == before
    assert eval_items == items_before

    d = report.to_dict()
    s = d["eval_sets"]["topics"]
    assert d["docs_scanned"] == len(docs) + 1 and d["verdict"] == "warning"
    assert s["contaminated_items"] == ["del/0", "for/0", "with/1"]
    assert s["docs_touched"] == sorted([*planted.values(), "c.txt#chunk0"])
    assert s["items"] == len(eval_items) and s["too_short_to_check"] == 0
    assert s["removed_chars"] == d["chars_removed"] > 0
    assert 1 <= len(s["examples"]) <= 3
    for ex in s["examples"]:
        assert text_words(ex["excerpt"]) == text_words(texts[ex["item_id"]])
    md = report.to_markdown()
    assert "| topics |" in md and "WARNING" in md and "del/0" in md and "c.txt#chunk0" in md


def test_report_verdicts(eval_items, train_docs):
    index = ContaminationIndex.build(eval_items + [("other", "o1", "completely separate words " * 5)])
    copies = [{"id": f"copy{k}", "source": "x", "domain": "x", "text": t} for k, (_, _, t) in enumerate(eval_items)]
    report = scan_corpus(index, train_docs[:3] + copies[: len(copies) // 2 + 1])
    assert report.sets["topics"].verdict == "error" and report.sets["other"].verdict == "ok"
    assert report.verdict == "error"
    assert len(report.sets["topics"].examples) == 3  # at most 3 examples, however many hits
    md = report.to_markdown()
    assert "ERROR: eval set 'topics' is largely a copy of the training data" in md
    assert "ok: no item of eval set 'other'" in md

    report = scan_corpus(index, train_docs[:3] + copies[:2])
    assert report.sets["topics"].verdict == "warning" and report.verdict == "warning"
    assert isinstance(report, ContaminationReport)


def test_text_training_files_are_chunked_with_overlap(tmp_path, eval_items):
    item = eval_items[0][2]
    filler = "".join(f"line {k} of filler text\n" for k in range(400))
    path = tmp_path / "big.txt"
    path.write_text(filler + item + "\n" + filler)
    boundary = len(filler) + len(item) // 2  # the first chunk ends in the middle of the item
    docs = list(iter_train_documents(path, text_chunk_chars=boundary, overlap_chars=4096))
    assert len(docs) >= 2
    index = ContaminationIndex.build(eval_items)
    # The chunk after the boundary repeats its end, so one chunk holds the whole item, not two halves.
    whole = len(text_words(item))
    spans = [m.word_end - m.word_start for d in docs for m in scan_document(index, d["text"])]
    assert whole in spans and max(spans) == whole
    with pytest.raises(UserError, match="training file not found"):
        list(iter_train_documents(tmp_path / "none.txt"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"body": 1}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:1: training record has no \"text\""):
        list(iter_train_documents(bad))


def test_batch_scan_ignores_windows_across_documents(eval_items):
    words = text_words(eval_items[2][2])[:20]  # each half is shorter than 13 words
    item_id = "twenty"
    index = ContaminationIndex.build([("s", item_id, " ".join(words))])
    head, tail = " ".join(words[:10]), " ".join(words[10:])
    assert scan_texts(index, ["intro " + head, tail + " outro"]) == [[], []]
    both = scan_texts(index, ["intro", head + " " + tail, "outro"])
    assert [[m.item_id for m in ms] for ms in both] == [[], [item_id], []]


def test_item_in_two_eval_sets_is_reported_for_both(eval_items, train_docs):
    _, _, text = eval_items[4]
    index = ContaminationIndex.build([("bench-a", "q1", text), ("bench-b", "x9", text),
                                      ("bench-b", "x10", "unrelated " * 20)])
    matches = scan_document(index, plant(train_docs[0]["text"], text))
    assert sorted((m.eval_set, m.item_id) for m in matches) == [("bench-a", "q1"), ("bench-b", "x9")]
