"""Benchmark the decontaminate stage's n-gram scan on a real corpus with planted contamination.

Corpus: every .py file of the Python standard library (site-packages and pydoc_data/topics.py excluded — the
latter is the eval source itself) plus the pydoc_data.topics documents. Eval set: 200 items, each two consecutive
prose paragraphs (>= 14 words each) of a topics document; their paragraphs are removed from the training copy
first. Items that still share a 13-gram with the clean corpus (the same sentence written elsewhere, found by an
exact pure-Python reference scan) or with another item are not used, so the clean corpus has no true overlap with
the eval set and each planted copy has one right answer.

50 items of each kind are planted into distinct, unrelated .py host files:
  verbatim      the item as is
  noisy         case, whitespace and punctuation changed
  partial       one paragraph of the item only
  paraphrase    10% of the item's words replaced by other words
Measured: recall per kind, false positives (flagged documents that hold no planted copy), agreement of the guard's
(document, item) hits with the exact reference, and scan throughput with 1 and 2 workers.

    PYTHONPATH=src python bench/contamination_bench.py
"""

from __future__ import annotations

import random
import re
import sysconfig
import time
from pathlib import Path

from pydoc_data.topics import topics

from scratchlm.decontaminate.corpus_scan import scan_corpus
from scratchlm.data.dedup.fingerprint import text_words
from scratchlm.data.dedup.ngram_index import ContaminationIndex
from scratchlm.data.dedup.ngram_scan import scan_texts

N = 13
ITEMS_PER_KIND = 50
KINDS = ("verbatim", "noisy", "partial", "paraphrase")
SEED = 0


def paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n[ \t]*\n", text)]


def is_prose(paragraph: str) -> bool:
    # Indented blocks are code examples and grammar rules, shared between many topics; prose is what gets copied.
    return not paragraph.startswith(" ") and len(text_words(paragraph)) >= 14


def load_corpus() -> tuple[list[dict], list[dict]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    py_docs = []
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib).as_posix()
        if rel.startswith("site-packages/") or rel == "pydoc_data/topics.py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a few test files are deliberately not UTF-8
        py_docs.append({"id": f"py:{rel}", "source": "stdlib", "domain": "code", "text": text})
    topic_docs = [{"id": f"topic:{k}", "source": "pydoc_topics", "domain": "docs", "text": v}
                  for k, v in sorted(topics.items())]
    return py_docs, topic_docs


def reference_hits(docs: list[dict], item_ngrams: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Exact, independent reference: (doc id, item id) for every doc holding one of the item's 13-grams, by
    comparing joined word strings in plain Python (no hashing, no numpy)."""
    owners: dict[str, list[str]] = {}
    for item_id, grams in item_ngrams.items():
        for g in grams:
            owners.setdefault(g, []).append(item_id)
    found = set()
    for doc in docs:
        words = text_words(doc["text"])
        for i in range(len(words) - N + 1):
            for item_id in owners.get(" ".join(words[i:i + N]), ()):
                found.add((doc["id"], item_id))
    return found


def ngrams(text: str) -> set[str]:
    words = text_words(text)
    return {" ".join(words[i:i + N]) for i in range(len(words) - N + 1)}


def make_noisy(text: str, rng: random.Random) -> str:
    """Change case, whitespace and punctuation, never the letters of words."""
    out = []
    for token in re.findall(r"\w+|\W+", text):
        if token[0].isalnum() or token[0] == "_":
            out.append(rng.choice([str.upper, str.lower, str.title, str.swapcase, lambda s: s])(token))
            continue
        punct = "".join(c for c in token if not c.isspace() and rng.random() < 0.5)  # drop about half
        if rng.random() < 0.15:
            punct += rng.choice([",", ";", "!", "...", " -", ":", "?", '"', "(", ")"])
        out.append(punct + rng.choice([" ", "  ", "\n", "\t", " \n  ", "   "]))
    return "".join(out)


def make_paraphrase(text: str, rng: random.Random, vocabulary: list[str]) -> str:
    tokens = re.findall(r"\w+|\W+", text)
    word_positions = [i for i, t in enumerate(tokens) if t[0].isalnum()]
    for i in rng.sample(word_positions, max(1, round(0.1 * len(word_positions)))):
        tokens[i] = rng.choice([w for w in rng.sample(vocabulary, 5) if w != tokens[i].lower()])
    return "".join(tokens)


def plant(host: str, insert: str, rng: random.Random) -> str:
    lines = host.splitlines(keepends=True)
    at = rng.randrange(1, len(lines)) if len(lines) > 1 else len(lines)
    return "".join(lines[:at]) + "\n" + insert + "\n" + "".join(lines[at:])


def main() -> None:
    rng = random.Random(SEED)
    t0 = time.perf_counter()
    py_docs, topic_docs = load_corpus()

    # Candidate eval items: two consecutive prose paragraphs of one topic, non-overlapping.
    candidates = []
    for doc in topic_docs:
        paras = paragraphs(doc["text"])
        k = 0
        while k + 1 < len(paras):
            if is_prose(paras[k]) and is_prose(paras[k + 1]):
                candidates.append((f"{doc['id']}/p{k}", paras[k], paras[k + 1]))
                k += 2
            else:
                k += 1
    rng.shuffle(candidates)
    candidates = candidates[:400]

    # Training copy: topics with every candidate paragraph removed (anywhere it appears: topics repeat text).
    removed = {" ".join(text_words(p)) for _, a, b in candidates for p in (a, b)}
    train_topics = []
    for doc in topic_docs:
        kept = [p for p in paragraphs(doc["text"]) if " ".join(text_words(p)) not in removed]
        train_topics.append({**doc, "text": "\n\n".join(kept)})
    clean = py_docs + train_topics

    cand_grams = {cid: ngrams(a + "\n\n" + b) for cid, a, b in candidates}
    natural = reference_hits(clean, cand_grams)
    overlapping = {item for _, item in natural}
    # Topics repeat sentences between them: keep items that share no 13-gram with an item kept before, so a
    # planted copy of one item is not also (rightly) a hit for another.
    usable, seen = [], set()
    for c in candidates:
        if c[0] not in overlapping and not (cand_grams[c[0]] & seen):
            usable.append(c)
            seen |= cand_grams[c[0]]
    chosen = usable[:ITEMS_PER_KIND * len(KINDS)]
    assert len(chosen) == ITEMS_PER_KIND * len(KINDS), f"only {len(usable)} usable eval items"
    print(f"candidates {len(candidates)}, sharing a 13-gram with the clean corpus (excluded): {len(overlapping)}, "
          f"with another candidate: {len(candidates) - len(overlapping) - len(usable)}, "
          f"eval items used: {len(chosen)}  [{time.perf_counter() - t0:.1f}s]")

    # Plant: item k goes into a distinct host .py file (hosts of >= 5 kB, so the copy is a small part of them).
    vocabulary = sorted({w for doc in train_topics for w in text_words(doc["text"]) if w.isalpha()})
    hosts = rng.sample([i for i, d in enumerate(py_docs) if len(d["text"]) >= 5000], len(chosen))
    planted = [dict(d) for d in clean]
    plan = {}  # host doc id -> (item id, kind)
    for k, ((item_id, a, b), host) in enumerate(zip(chosen, hosts)):
        kind = KINDS[k % len(KINDS)]
        item_text = a + "\n\n" + b
        insert = {"verbatim": item_text,
                  "noisy": make_noisy(item_text, rng),
                  "partial": rng.choice([a, b]),
                  "paraphrase": make_paraphrase(item_text, rng, vocabulary)}[kind]
        planted[host]["text"] = plant(planted[host]["text"], insert, rng)
        plan[planted[host]["id"]] = (item_id, kind)

    eval_items = [("topics-eval", item_id, a + "\n\n" + b) for item_id, a, b in chosen]
    t1 = time.perf_counter()
    index = ContaminationIndex.build(eval_items, n=N)
    build_s = time.perf_counter() - t1
    total_mb = sum(len(d["text"].encode()) for d in planted) / 1e6
    print(f"corpus: {len(planted)} docs, {total_mb:.1f} MB; index: {index.num_fingerprints} fingerprints, "
          f"built in {build_s * 1000:.0f} ms")

    # Throughput: 1 and 2 workers alternated, 3 runs each, best kept (the machine is shared, so runs are noisy).
    hits_by_workers, timings = {}, {1: [], 2: []}
    for _ in range(3):
        for workers in (1, 2):
            t1 = time.perf_counter()
            report = scan_corpus(index, planted, mode="document", workers=workers)
            kept_docs = report.docs_scanned - report.docs_dropped
            timings[workers].append(time.perf_counter() - t1)
            hits_by_workers[workers] = (report, kept_docs)
    for workers, seconds in timings.items():
        runs = ", ".join(f"{total_mb / s:.1f}" for s in seconds)
        print(f"scan, {workers} worker(s): best {min(seconds):.2f} s = {total_mb / min(seconds):.1f} MB/s "
              f"(runs: {runs} MB/s)")
    report, kept_docs = hits_by_workers[1]

    # Per (doc, item) hits, from a direct scan so every pair is seen (the report keeps ids, not pairs).
    guard_pairs = set()
    for start in range(0, len(planted), 256):
        batch = planted[start:start + 256]
        for doc, matches in zip(batch, scan_texts(index, [d["text"] for d in batch])):
            guard_pairs.update((doc["id"], m.item_id) for m in matches)
    eval_grams = {item_id: ngrams(text) for _, item_id, text in eval_items}
    host_docs = [d for d in planted if d["id"] in plan]
    exact_pairs = reference_hits(host_docs, eval_grams)  # non-host docs are the clean corpus: no overlap by design

    print()
    print("| kind | planted | detected | recall | detectable by exact 13-gram reference |")
    print("|---|---:|---:|---:|---:|")
    for kind in KINDS:
        planted_here = [(doc_id, item) for doc_id, (item, k) in plan.items() if k == kind]
        detected = sum((doc_id, item) in guard_pairs for doc_id, item in planted_here)
        detectable = sum((doc_id, item) in exact_pairs for doc_id, item in planted_here)
        print(f"| {kind} | {len(planted_here)} | {detected} | {detected / len(planted_here):.2f} | {detectable} |")
    flagged_docs = {doc_id for doc_id, _ in guard_pairs}
    false_pos = sorted(flagged_docs - set(plan))
    wrong_item = sorted((d, i) for d, i in guard_pairs if d in plan and plan[d][0] != i)
    print()
    print(f"false positives: {len(false_pos)} flagged docs with no planted copy (of {len(planted) - len(plan)} clean)"
          f"{' ' + str(false_pos[:5]) if false_pos else ''}; hits on a host for an item not planted there: "
          f"{len(wrong_item)}")
    print(f"guard (doc, item) pairs == exact reference pairs: {guard_pairs == exact_pairs} "
          f"({len(guard_pairs)} vs {len(exact_pairs)})")
    same = hits_by_workers[1][0].to_dict()["eval_sets"] == hits_by_workers[2][0].to_dict()["eval_sets"]
    print(f"report identical with 1 and 2 workers: {same}; docs kept (document mode): {kept_docs} of {len(planted)}; "
          f"verdict {report.verdict} ({report.sets['topics-eval'].contaminated_fraction:.0%} of items)")
    print(f"total bench time {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
