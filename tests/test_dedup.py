import random
import sysconfig
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from scratchlm.data.dedup import minhash as mh
from scratchlm.data.dedup.exact import ExactDeduper
from scratchlm.data.dedup.minhash import (
    BandIndex,
    FuzzyDeduper,
    MinHashConfig,
    UnionFind,
    estimated_jaccard,
    minhash_signatures,
    shingle_hashes,
)
from scratchlm.data.dedup.paragraphs import ParagraphDeduper
from scratchlm.data.dedup.words import normalize_for_hash, word_shingles
from scratchlm.errors import UserError

STDLIB = Path(sysconfig.get_paths()["stdlib"])
MASK64 = (1 << 64) - 1

MIT_PERMISSION = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and "
    'associated documentation files (the "Software"), to deal in the Software without restriction, including '
    "without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell "
    "copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the "
    "following conditions:"
)
MIT_NOTICE = (
    "The above copyright notice and this permission notice shall be included in all copies or substantial "
    "portions of the Software."
)


def stdlib_texts(names: list[str]) -> list[str]:
    return [(STDLIB / name).read_text(encoding="utf-8") for name in names]


UNRELATED = stdlib_texts(
    ["argparse.py", "bisect.py", "calendar.py", "csv.py", "difflib.py", "fractions.py", "gzip.py", "heapq.py",
     "ipaddress.py", "json/decoder.py", "locale.py", "mailbox.py", "netrc.py", "optparse.py", "pprint.py",
     "queue.py", "random.py", "sched.py", "shlex.py", "statistics.py", "textwrap.py", "uuid.py", "wave.py",
     "zipfile.py"]
)


def true_jaccard(a: str, b: str, n: int = 5) -> float:
    sa, sb = set(word_shingles(a, n)), set(word_shingles(b, n))
    return len(sa & sb) / len(sa | sb)


def edit_span(text: str, start_fraction: float, fraction: float, rng: random.Random) -> str:
    """Edit `fraction` of the words around start_fraction of the document: a third of that is replaced, a third
    deleted, and a third inserted as new words (like a reworded sentence)."""
    words = text.split()
    start, third = int(len(words) * start_fraction), max(1, int(len(words) * fraction / 3))
    new = [f"edited{rng.randrange(10**6)}" for _ in range(2 * third)]
    return " ".join(words[:start] + new + words[start + 2 * third :])


# --- normalization ------------------------------------------------------------------------------------------


def test_normalize_folds_case_punctuation_whitespace_and_compatibility_forms():
    assert normalize_for_hash("  Hello,\tWORLD!!\n os.path  ") == "hello world os path"
    assert normalize_for_hash("ＡＢＣ ﬁle — Straße\u00a0x\u2028y") == "abc file straße x y"
    assert normalize_for_hash("...") == ""


def test_ascii_fast_path_matches_the_unicode_definition():
    text = "".join(chr(c) for c in range(128)) + " Mixed CASE, text; with_under-scores 42!"
    table = {ord(c): " " for c in map(chr, range(128)) if unicodedata.category(c)[0] in "PS"}
    slow = " ".join(unicodedata.normalize("NFKC", text).lower().translate(table).split())
    assert normalize_for_hash(text) == slow
    assert normalize_for_hash(text + "é") == slow + " é"  # the non-ASCII path agrees on the ASCII part


def test_word_shingles():
    assert word_shingles("A b, c. d e f") == ["a b c d e", "b c d e f"]
    assert word_shingles("two words") == ["two words"]
    assert word_shingles("  ") == []


# --- exact --------------------------------------------------------------------------------------------------


def test_exact_deduper_first_occurrence_wins():
    dedup = ExactDeduper()
    assert dedup.check("a", "Hello World. This is a doc.") is None
    assert dedup.check("b", "hello   world this IS a doc") == "a"
    assert dedup.check("c", "Hello World. This is another doc.") is None
    assert dedup.check("d", "HELLO WORLD! this is a doc!") == "a"
    assert (len(dedup), dedup.num_duplicates) == (2, 2)


# --- shingle hashing and signatures against slow references -------------------------------------------------


def fmix64_ref(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    return h ^ (h >> 33)


def word_hash_ref(word: bytes) -> int:
    blocks = [int.from_bytes(word[k : k + 8].ljust(8, b"\0"), "little") for k in range(0, len(word), 8)]
    acc = blocks[0] ^ ((len(word) * mh.LENGTH_MIX) & MASK64)
    for k, block in enumerate(blocks[1:], start=1):
        acc += fmix64_ref((block + k * mh.BLOCK_MIX) & MASK64)
    return fmix64_ref(acc & MASK64)


def shingle_hashes_ref(text: str, n: int, seed: int) -> list[int]:
    base = mh.polynomial_base(seed)
    hashes = []
    for shingle in word_shingles(text, n):
        poly = sum(word_hash_ref(w.encode()) * pow(base, j, 1 << 64) for j, w in enumerate(shingle.split(" ")))
        hashes.append(fmix64_ref(poly & MASK64))
    return hashes


def signature_ref(text: str, cfg: MinHashConfig) -> list[int]:
    a, b = mh.permutation_params(cfg.num_perm, cfg.seed)
    xs = [h % mh.MERSENNE_31 for h in shingle_hashes_ref(text, cfg.ngram, cfg.seed)]
    if not xs:
        return [mh.EMPTY_SIGNATURE_VALUE] * cfg.num_perm
    return [min((int(a[k]) * x + int(b[k])) % mh.MERSENNE_31 for x in xs) for k in range(cfg.num_perm)]


REFERENCE_DOCS = [
    "The quick brown fox jumps over the lazy dog, twice: the quick brown fox!",
    "short doc",
    "",
    "Ünïcödé Straße — ﬁne words, averyveryverylongidentifier_with_underscores and x" * 3,
    "\n\t  spaced    out\n\n text   with  runs   of    whitespace and more words here  \n",
    UNRELATED[1][:3000],
]


def test_vectorized_shingle_hashes_match_reference():
    hashes, offsets = shingle_hashes(REFERENCE_DOCS, 5, seed=3)
    for i, doc in enumerate(REFERENCE_DOCS):
        assert hashes[offsets[i] : offsets[i + 1]].tolist() == shingle_hashes_ref(doc, 5, 3)


def test_numpy_signatures_match_slow_reference(monkeypatch):
    # Small blocks force documents to straddle block boundaries, the tricky part of the vectorized min.
    monkeypatch.setattr(mh, "_NUMPY_CHUNK_CELLS", 7 * 16)
    cfg = MinHashConfig(num_perm=16, bands=4, rows=4, seed=5, backend="numpy")
    signatures = minhash_signatures(REFERENCE_DOCS, cfg)
    assert signatures.shape == (len(REFERENCE_DOCS), 16) and signatures.dtype == np.uint32
    for doc, row in zip(REFERENCE_DOCS, signatures):
        assert row.tolist() == signature_ref(doc, cfg)


@pytest.mark.parametrize("backend", ["numpy", "rensa"])
def test_signatures_estimate_jaccard(backend):
    rng = random.Random(0)
    original = UNRELATED[0][:20000]
    copy = edit_span(original, 0.3, 0.05, rng)
    cfg = MinHashConfig(backend=backend)
    first, second = minhash_signatures([original, copy], cfg), minhash_signatures([original, copy], cfg)
    assert np.array_equal(first, second)  # deterministic
    assert abs(estimated_jaccard(first[0], first[1]) - true_jaccard(original, copy)) < 0.12
    assert estimated_jaccard(first[0], minhash_signatures([UNRELATED[5]], cfg)[0]) < 0.1


# --- LSH building blocks ------------------------------------------------------------------------------------


def test_union_find_root_is_smallest_member():
    sets = UnionFind()
    sets.grow(6)
    sets.union(4, 5)
    sets.union(5, 2)
    sets.union(0, 1)
    assert sets.roots().tolist() == [0, 0, 2, 3, 2, 2]
    sets.union(1, 4)
    assert sets.roots().tolist() == [0, 0, 0, 3, 0, 0]


def test_band_index_returns_earliest_items_capped():
    index = BandIndex(max_candidates_per_key=2)
    index.add(np.array([7, 7, 9, 7], dtype=np.uint64), np.array([0, 1, 2, 3]))
    index.add(np.array([9], dtype=np.uint64), np.array([4]))
    positions, items = index.lookup(np.array([5, 7, 9], dtype=np.uint64))
    found = sorted(zip(positions.tolist(), items.tolist()))
    assert found == [(1, 0), (1, 1), (2, 2), (2, 4)]


# --- FuzzyDeduper -------------------------------------------------------------------------------------------


def test_near_duplicates_found_at_ten_percent_edits():
    rng = random.Random(1)
    originals = UNRELATED[2:8]  # bisect.py is so short and terse that 10% edits take it to J = 0.82
    copies = [edit_span(doc, 0.4, 0.10, rng) for doc in originals]
    assert all(0.85 < true_jaccard(o, c) < 0.95 for o, c in zip(originals, copies))
    dedup = FuzzyDeduper()
    first_ids = [f"orig{i}" for i in range(6)]
    assert dedup.add_batch(first_ids, originals) == [None] * 6
    verdicts = dedup.add_batch([f"copy{i}" for i in range(6)], copies)
    assert verdicts == first_ids
    assert sorted(dedup.clusters()) == sorted([f"orig{i}", f"copy{i}"] for i in range(6))


def test_unrelated_documents_are_not_merged():
    dedup = FuzzyDeduper()
    verdicts = dedup.add_batch([str(i) for i in range(len(UNRELATED))], UNRELATED)
    assert verdicts == [None] * len(UNRELATED)
    assert dedup.clusters() == [] and dedup.duplicates() == {}


def test_empty_documents_are_never_clustered():
    dedup = FuzzyDeduper()
    assert dedup.add_batch(["a", "b", "c"], ["", "  ...  ", ""]) == [None, None, None]
    assert dedup.clusters() == []


def test_transitive_chain_forms_one_cluster():
    # Each link edits a different 6% span, so neighbours are ~0.85-0.9 similar but the ends are not.
    rng = random.Random(2)
    chain = [UNRELATED[2][:30000]]
    for step in range(5):
        chain.append(edit_span(chain[-1], 0.15 * step + 0.05, 0.06, rng))
    ids = [f"v{i}" for i in range(len(chain))]
    dedup = FuzzyDeduper()
    for doc_id, doc in zip(ids, chain):  # one per batch: exercises the stored index, not just within-batch
        dedup.add_batch([doc_id], [doc])
    assert dedup.clusters() == [ids]
    ends = minhash_signatures([chain[0], chain[-1]])
    threshold = MinHashConfig().threshold
    assert estimated_jaccard(ends[0], ends[1]) < threshold  # so only transitivity can have joined them
    kept, jaccard = dedup.duplicates()["v5"]
    assert kept == "v0" and jaccard < threshold


def test_representative_is_first_added_and_batching_does_not_matter():
    rng = random.Random(3)
    docs = UNRELATED[:4] + [edit_span(d, 0.5, 0.08, rng) for d in UNRELATED[:4]]
    order = [6, 1, 2, 4, 0, 5, 3, 7]  # the copy of doc 2 (id 6) arrives before its original
    ids, texts = [f"d{i}" for i in order], [docs[i] for i in order]
    results = []
    for batch in (1, 3, 8):
        dedup = FuzzyDeduper()
        for lo in range(0, len(ids), batch):
            dedup.add_batch(ids[lo : lo + batch], texts[lo : lo + batch])
        results.append((dedup.clusters(), dedup.duplicates()))
    assert results[0] == results[1] == results[2]
    clusters, duplicates = results[0]
    assert clusters == [["d6", "d2"], ["d1", "d5"], ["d4", "d0"], ["d3", "d7"]]
    assert duplicates["d2"][0] == "d6" and duplicates["d2"][1] >= 0.8


def test_fuzzy_deduper_rejects_mismatched_batch_and_bad_config():
    with pytest.raises(UserError):
        FuzzyDeduper().add_batch(["a", "b"], ["only one"])
    with pytest.raises(UserError):
        MinHashConfig(num_perm=112, bands=20, rows=8)
    with pytest.raises(UserError):
        MinHashConfig(backend="gpu")


# --- paragraphs ---------------------------------------------------------------------------------------------


def readme(title: str, body: str, copyright_line: str, separate: bool = True) -> str:
    license_text = f"{copyright_line}\n\n{MIT_PERMISSION}" if separate else f"{copyright_line}\n{MIT_PERMISSION}"
    return f"# {title}\n\n{body}\n\n## License\n\n{license_text}\n\n{MIT_NOTICE}\n"


def test_paragraph_dedup_removes_repeated_license_from_later_docs_only():
    dedup = ParagraphDeduper()
    first = readme("alpha", "A library that parses configuration files of many kinds, quickly.", "Copyright 2020 Ann")
    out, removed = dedup.process("alpha", first)
    assert out == first and removed == []

    second = readme("beta", "A command line tool that renames photos by the date they were taken.", "Copyright 2021 Bob")
    out, removed = dedup.process("beta", second)
    assert [(r.kind, r.first_doc_id) for r in removed] == [("exact", "alpha"), ("exact", "alpha")]
    assert "Permission is hereby granted" not in out and MIT_NOTICE not in out
    assert "renames photos" in out and "Copyright 2021 Bob" in out and "## License" in out  # short: kept
    assert removed[0].excerpt.startswith("Permission is hereby granted")

    # The copyright line glued into the permission paragraph makes it a near duplicate, not an exact one.
    third = readme("gamma", "Plots weather station data on a map.", "Copyright (c) 2022 Carol Smith", separate=False)
    out, removed = dedup.process("gamma", third)
    assert [(r.kind, r.first_doc_id) for r in removed] == [("near", "alpha"), ("exact", "alpha")]
    assert out == "# gamma\n\nPlots weather station data on a map.\n\n## License"


def test_paragraph_dedup_keeps_unrelated_text_and_repeats_within_one_doc():
    dedup = ParagraphDeduper()
    doc = f"{MIT_PERMISSION}\n\n{MIT_PERMISSION}\n"
    assert dedup.process("one", doc) == (doc, [])
    other = UNRELATED[3]
    out, removed = dedup.process("two", other)
    assert removed == [] and out == other
