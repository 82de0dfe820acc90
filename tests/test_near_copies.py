"""Near copies with a few percent of their words changed are dropped by the data stage's document dedup at its
defaults (bench/near_copies.py: 98% of the copies with 3% of their words changed, on the Debian documentation);
documents that are merely similar are not."""
from __future__ import annotations

import encodings
import json
import random
import re
from pathlib import Path

from test_disk_dedup import _on_disk, _runner

WORD = re.compile(r"[^\W_]+")


def _changed(text: str, share: float, rng: random.Random, vocabulary: list[str]) -> str:
    """`text` with `share` of its words replaced by other words of the corpus, at scattered places (the layout
    stays): a word changed every 33 words at 3% leaves 0.97^5 = 86% of the word 5-grams, J = 0.75."""
    spans = [m.span() for m in WORD.finditer(text)]
    parts, last = [], 0
    for at in sorted(rng.sample(range(len(spans)), max(1, round(len(spans) * share)))):
        start, end = spans[at]
        word = rng.choice(vocabulary)
        while word.lower() == text[start:end].lower():
            word = rng.choice(vocabulary)
        parts += [text[last:start], word]
        last = end
    return "".join(parts + [text[last:]])


def test_copies_with_three_percent_of_their_words_changed_are_dropped(core_corpus, tmp_path):
    rng = random.Random(11)
    paths, copies = {}, {}
    for name in ("web", "docs"):
        docs = [json.loads(line)["text"] for line in core_corpus[name].read_text().splitlines()][:250]
        vocabulary = [w for d in docs for w in WORD.findall(d)]
        originals = [i for i, d in enumerate(docs) if len(WORD.findall(d)) >= 300]
        # the long pages too: over ~900 words, 3% of changed words used to make a copy "a page of its own"
        for i in rng.sample(originals, 15):
            copies[f"{name}/{name}.jsonl:{len(docs) + 1}"] = (f"{name}/{name}.jsonl:{i + 1}", len(docs[i].split()))
            docs.append(_changed(docs[i], 0.03, rng, vocabulary))
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    assert sum(words > 1500 for _, words in copies.values()) >= 5
    run, corpus = _runner(tmp_path, paths)
    dropped = _on_disk(run, corpus)

    def found(copy: str, original: str) -> bool:
        """The copy went, or its original went for it (a partial copy goes and the longer page stays)."""
        return (dropped.get(copy, {}).get("rule") in ("near_duplicate", "contained_duplicate")
                or copy in dropped.get(original, {}).get("detail", ""))

    missed = sorted(copy for copy, (original, _) in copies.items() if not found(copy, original))
    assert len(missed) <= 0.1 * len(copies), missed


def test_documents_that_are_merely_similar_are_kept(tmp_path):
    """Generated codec modules whose tables share 40-60% of their word 5-grams (one charset next to another),
    and reference topics on one subject (a class and a function definition, raise and try, async and with; the
    topics that are sections of others are partial copies): none is a copy of another."""
    from pydoc_data.topics import topics

    folder = Path(encodings.__file__).parent
    modules = ["cp1250", "cp1252", "cp437", "cp850", "mac_roman", "mac_greek", "iso8859_14", "iso8859_16"]
    code = tmp_path / "code.jsonl"
    code.write_text("".join(json.dumps({"text": (folder / f"{m}.py").read_text()}) + "\n" for m in modules))
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": topics[t]}) + "\n"
                            for t in ("class", "function", "raise", "try", "async", "with")))
    run, corpus = _runner(tmp_path, {"code": code, "docs": docs})
    assert _on_disk(run, corpus) == {}
