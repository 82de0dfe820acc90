"""SFT pairs against the evaluation data (sft/overlap.py), on a data artifact the data stage prepared from a small
slice of the built-in corpus: pairs planted with passages of validation documents and with eval-set items are
found, and only they; a held-out pair copied from a training pair is not held out; a lightly edited copy is found
as the decontaminate guard finds it; a target that could not be scanned is said, never reported ok."""
from __future__ import annotations

import dataclasses
import json
import random

import pytest

from scratchlm.data.builtin import docs_documents, web_documents
from scratchlm.data.dedup.fingerprint import text_words
from scratchlm.data.dedup.ngram_index import ContaminationIndex
from scratchlm.data.dedup.ngram_scan import scan_document
from scratchlm.data.jsonl import read_jsonl
from scratchlm.ids import read_json
from scratchlm.sft.overlap import scan_sft_overlap
from scratchlm.stages import load_config, plan_artifacts, stage_data

DOCS_PER_DOMAIN = 20  # enough for the data stage to hold out 4 to 6 documents per domain, in a few seconds
EVAL_SET = '\n[[eval.sets]]\nname = "qa"\npath = "qa.jsonl"\n'
QA = [
    {"id": "capitals", "question": "Which river flows through the old town where the glass blowers keep their "
                                   "furnaces lit all winter?",
     "answer": "The Varrow river, whose cold water the blowers use to temper the finished bowls before market."},
    {"id": "short", "text": "the lighthouse keeper counts eleven gulls every dawn"},  # 8 words: matched whole
    {"id": "tiny", "text": "yes it is"},  # under min_words: not checked
]


def invented_text(rng: random.Random, words: int) -> str:
    """Words found in no corpus: text that shares no n-gram with anything but a copy of itself."""
    syllables = ["ka", "lo", "mir", "tse", "vun", "dra", "po", "quel", "zi", "bar", "nod", "fey"]
    return " ".join("".join(rng.choice(syllables) for _ in range(3)) for _ in range(words))


def clean_pair(rng: random.Random) -> list[dict]:
    return [{"role": "user", "content": invented_text(rng, 12) + "?"},
            {"role": "assistant", "content": invented_text(rng, 50) + "."}]


def passage(text: str, words: int = 60, start: int = 20) -> str:
    """`words` whitespace-separated tokens of a document, as a writer would paste them."""
    return " ".join(text.split()[start:start + words])


def ngrams(text: str, n: int = 13) -> set[tuple[str, ...]]:
    words = text_words(text)
    return {tuple(words[k:k + n]) for k in range(len(words) - n + 1)}


@pytest.fixture(scope="module")
def prepared(micro_config, tmp_path_factory):
    """(config, data dir, validation docs per domain, training docs) of a data stage run on 20 docs + 20 web pages."""
    d = tmp_path_factory.mktemp("sft_overlap")
    corpus = {}
    for domain, docs in (("docs", docs_documents()), ("web", web_documents())):
        corpus[domain] = d / f"{domain}.jsonl"
        corpus[domain].write_text("".join(json.dumps(doc) + "\n" for _, doc in zip(range(DOCS_PER_DOMAIN), docs)))
    (d / "qa.jsonl").write_text("".join(json.dumps(item) + "\n" for item in QA))
    cfg = load_config(micro_config(d, corpus, steps=10, ckpt=10, extra=EVAL_SET))
    stage_data(cfg, plan_artifacts(cfg))
    data_dir = plan_artifacts(cfg)["data"].dir
    val = {path.stem: [doc for doc in read_jsonl(path) if len(doc["text"].split()) >= 100]
           for path in (data_dir / "val").glob("*.jsonl")}
    stats = read_json(data_dir / "stats.json")
    train = [doc for files in stats["train_files"].values() for f in files for doc in read_jsonl(data_dir / "train" / f)]
    assert len(val["docs"]) >= 2 and len(val["web"]) >= 1
    return cfg, data_dir, val, train


@pytest.fixture(scope="module")
def planted(prepared):
    """Training pairs: clean ones, with planted copies among them, and what the scan must find: (split, index,
    target, item)."""
    cfg, data_dir, val, train_docs = prepared
    rng = random.Random(7)
    pairs = [clean_pair(rng) for _ in range(30)]
    expected = set()

    def plant(k: int, pair: list[dict], target: str, item: str) -> None:
        pairs[k] = pair
        expected.add(("train", k, target, item))

    for k, (domain, doc) in zip((3, 11, 17), [("docs", val["docs"][0]), ("docs", val["docs"][1]),
                                              ("web", val["web"][0])]):
        plant(k, [{"role": "user", "content": "Explain this."},
                  {"role": "assistant", "content": f"Sure. {passage(doc['text'])} Hope it helps."}],
              f"validation:{domain}", doc["id"])
    plant(5, [{"role": "user", "content": QA[0]["question"]}, {"role": "assistant", "content": QA[0]["answer"]}],
          "eval_set:qa", "capitals")
    plant(23, [{"role": "system", "content": "You answer briefly."},
               {"role": "user", "content": invented_text(rng, 15)},
               {"role": "assistant", "content": f"{invented_text(rng, 20)} {QA[1]['text']} {invented_text(rng, 5)}"}],
          "eval_set:qa", "short")
    # A passage of a training document is no evaluation text: it must not be reported.
    train_text = next(passage(doc["text"]) for doc in train_docs if len(doc["text"].split()) >= 100
                      and not ngrams(passage(doc["text"])) & {g for docs in val.values() for v in docs
                                                              for g in ngrams(v["text"])})
    pairs[29] = [{"role": "user", "content": "And this?"}, {"role": "assistant", "content": train_text}]
    return pairs, expected


def found(result: dict) -> set[tuple]:
    return {(o["split"], o["index"], o["target"], o["item"]) for o in result["overlaps"]}


def test_planted_copies_are_found_and_nothing_else(prepared, planted):
    cfg, data_dir, _, _ = prepared
    pairs, expected = planted
    result = scan_sft_overlap(cfg, data_dir, pairs, [], train_lines=[k + 1 for k in range(len(pairs))])
    assert found(result) == expected and result["overlaps_total"] == len(expected)
    by_index = {o["index"]: o for o in result["overlaps"]}
    assert by_index[3]["line"] == 4 and by_index[3]["roles"] == ["assistant"]
    assert by_index[3]["shared_ngrams"] > 30 and 0.5 < by_index[3]["share"] < 1
    assert by_index[5]["roles"] == ["user", "assistant"] and by_index[5]["share"] == 1.0  # across the two turns
    assert result["targets"]["eval_set:qa"] == {"items": 3, "items_too_short": 1,
                                                "overlapping_pairs": {"train": 2, "heldout": 0}}
    assert result["targets"]["validation:docs"]["overlapping_pairs"]["train"] == 2
    assert result["not_scanned"] == {} and result["ngram"] == 13
    assert result["verdict"]["level"] == "warning"
    assert result["verdict"]["message"] == (
        "3 of 30 training pairs share 13-word spans with the pretraining validation split (docs 2, web 1); "
        "2 of 30 training pairs share 13-word spans with eval set 'qa'")


def test_a_heldout_pair_copied_from_a_training_pair_is_not_held_out(prepared):
    cfg, data_dir, _, _ = prepared
    rng = random.Random(11)
    train = [clean_pair(rng) for _ in range(20)]
    heldout = [clean_pair(rng) for _ in range(5)]
    answer = train[8][1]["content"].split()
    answer[25] = "changed"
    heldout[2] = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Another question?"},
                  {"role": "assistant", "content": " ".join(answer)}]
    result = scan_sft_overlap(cfg, data_dir, train, heldout, train_lines=[k + 2 for k in range(20)],
                              heldout_lines=list(range(1, 6)))
    assert [(o["split"], o["index"], o["target"], o["item"], o["item_line"], o["line"]) for o in result["overlaps"]] \
        == [("heldout", 2, "sft_train", 8, 10, 3)]
    assert result["targets"]["sft_train"]["overlapping_pairs"] == {"heldout": 1}
    assert result["verdict"]["message"] == ("1 of 5 held-out pairs shares 13-word spans with training pairs: "
                                            "not held out")


def test_clean_pairs_are_ok(prepared):
    cfg, data_dir, _, _ = prepared
    rng = random.Random(3)
    result = scan_sft_overlap(cfg, data_dir, [clean_pair(rng) for _ in range(20)], [clean_pair(rng) for _ in range(4)])
    assert result["overlaps"] == [] and result["not_scanned"] == {}
    assert set(result["targets"]) == {"validation:docs", "validation:web", "eval_set:qa", "sft_train"}
    assert result["verdict"] == {"level": "ok", "message": "no SFT pair shares a 13-word span with: eval_set:qa, "
                                                           "sft_train, validation:docs, validation:web"}


def test_a_lightly_edited_copy_is_found_as_the_decontaminate_guard_finds_it(prepared):
    cfg, data_dir, val, _ = prepared
    doc = val["docs"][0]
    words = passage(doc["text"]).split()
    for k in (15, 30, 45):
        words[k] = "EDITED"
    edited = " ".join(words)
    result = scan_sft_overlap(cfg, data_dir, [[{"role": "user", "content": "Quote it."},
                                               {"role": "assistant", "content": edited}]], [])
    [overlap] = result["overlaps"]
    assert (overlap["target"], overlap["item"]) == ("validation:docs", doc["id"])
    # The guard's own scan of the edited passage, as a training document, finds the same shared windows.
    guard = ContaminationIndex.build([("validation/docs", doc["id"], doc["text"])])
    matches = scan_document(guard, "Quote it.\n" + edited)
    assert matches and overlap["shared_ngrams"] == sum(m.word_end - m.word_start - 12 for m in matches)
    assert overlap["share"] < 1


def test_pairs_shorter_than_ngram_follow_the_min_words_rule(prepared):
    cfg, data_dir, val, _ = prepared
    doc = val["web"][0]
    # A completion pair continuing a sentence of a validation document: 10 words in all, no 13-gram.
    start, end = passage(doc["text"], words=5, start=30), passage(doc["text"], words=5, start=35)
    assert 8 <= len(text_words(f"{start} {end}")) < 13
    pairs = [[{"role": "user", "content": start}, {"role": "assistant", "content": end}],
             [{"role": "user", "content": "Quote."}, {"role": "assistant", "content": passage(doc["text"], 4, 30)}]]
    result = scan_sft_overlap(cfg, data_dir, pairs, [])
    assert found(result) == {("train", 0, "validation:web", doc["id"])}  # matched whole, as a short eval item
    assert result["overlaps"][0]["share"] == 1.0 and result["pairs_too_short"] == {"train": 1, "heldout": 0}


def test_a_target_not_scanned_is_named_and_never_ok(prepared, planted, tmp_path):
    cfg, _, _, _ = prepared
    pairs, expected = planted
    without = scan_sft_overlap(cfg, None, pairs, [])
    assert found(without) == {e for e in expected if e[2] == "eval_set:qa"}  # the eval sets are still scanned
    assert without["not_scanned"] == {"validation": "no data directory was given"}
    rng = random.Random(5)
    clean = scan_sft_overlap(cfg, tmp_path, [clean_pair(rng)], [])
    assert clean["verdict"]["level"] == "warning" and clean["overlaps"] == []
    assert clean["verdict"]["message"] == f"the validation split was not scanned: no validation split in {tmp_path}"
    unguarded = dataclasses.replace(cfg, decontaminate=dataclasses.replace(cfg.decontaminate, guard_validation=False))
    off = scan_sft_overlap(unguarded, prepared[1], [clean_pair(rng)], [])
    assert off["verdict"]["level"] == "warning" and "guard_validation is false" in off["not_scanned"]["validation"]
