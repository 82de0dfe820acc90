"""The validation draw's guard answers every draw from one scan of the corpus (val_guard.CopyPool), deciding
exactly what the draw-then-scan loop it replaced decided: the same split, plan and near copies, in the same order."""
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from scratchlm.data import split_step, val_guard
from scratchlm.data.ranked_runs import RankedDocs
from scratchlm.data.val_guard import near_copies
from scratchlm.data.val_split import WHOLE, ValidationSettings, draw_validation, tail_cut

SETTINGS = ValidationSettings(domains=("long", "short"), seed=7, val_fraction=0.1, val_max_docs=8, val_min_docs=2,
                              val_min_chars=2000, val_max_share=0.05, min_chars=100, guard_ngram=13,
                              guard_min_words=8, guard_coverage=0.5)


def _corpus() -> list[tuple[SimpleNamespace, dict]]:
    """(unit, document) in corpus order. "short": 150 documents of ~1 KB, two in three with a near copy (one word
    changed), so a draw of 8 keeps finding copies and each redraw's replacements have copies too. "long": 8
    documents of ~20 KB, too long to hold out whole: their tails are, and three of them have their second half
    copied into a later one, so the redraws cut the remaining tails elsewhere."""
    rng = random.Random(4)

    def words(n: int) -> list[str]:
        return [f"w{rng.randrange(20000)}" for _ in range(n)]

    def paragraphs(count: int, size: int) -> str:
        return "\n\n".join(" ".join(words(size)) for _ in range(count))

    units = [SimpleNamespace(name=f"{d}-{k:05d}", domain=d) for d, k in (("short", 0), ("short", 1), ("long", 0))]
    short = []
    for i in range(100):
        text = paragraphs(3, 50)
        short.append({"id": f"short/{i}", "text": text})
        if i % 2:  # a near copy, later in the corpus
            changed = text.split(" ")
            changed[rng.randrange(len(changed))] = "changed"
            short.append({"id": f"short/{i}-copy", "text": " ".join(changed)})
    long = [{"id": f"long/{i}", "text": paragraphs(40, 70)} for i in range(10)]
    for source, host in ((0, 7), (1, 8), (3, 9)):
        text = long[source]["text"]
        long[host]["text"] += "\n\n" + text[len(text) // 2:]
    return ([(units[0], d) for d in short[:70]] + [(units[1], d) for d in short[70:]] +
            [(units[2], d) for d in long])


def _context(pairs: list, workers: int = 1):
    units = list({id(u): u for u, _ in pairs}.values())
    ranked = {domain: RankedDocs([(d["id"], len(d["text"]), u.name) for u, d in pairs if u.domain == domain],
                                 SETTINGS.seed) for domain in SETTINGS.domains}
    ctx = SimpleNamespace(settings=SETTINGS, runner=SimpleNamespace(units=units, workers=workers),
                          docs=lambda: iter(pairs))
    return ctx, ranked


def _reference(ctx, survivors) -> tuple[dict, dict, dict, int]:
    """The loop split_step ran before CopyPool: draw, scan the whole corpus for the drawn texts' copies, put them
    back, draw again. Returns its decision and how many times it scanned the corpus."""
    s, scans = ctx.settings, 0
    domain_of = {u.name: u.domain for u in ctx.runner.units}
    near_copied, near_per_domain, excluded = {}, Counter(), set()
    for round_ in range(split_step.GUARD_ROUNDS):
        chosen, plan = draw_validation(s, survivors, excluded)
        if round_ == split_step.GUARD_ROUNDS - 1:
            break
        held = {}
        for unit, doc in ctx.docs():
            budget = chosen.get(unit.name, {}).get(doc["id"])
            if budget == WHOLE:
                held[doc["id"]] = doc["text"]
            elif budget is not None and (cut := tail_cut(doc["text"], budget, s.min_chars)) is not None:
                held[doc["id"]] = doc["text"][cut:]
        found = near_copies(held, (doc for _, doc in ctx.docs()), s.guard_ngram, s.guard_min_words, s.guard_coverage)
        scans += 1
        if not found:
            break
        near_copied.update(found)
        near_per_domain.update(domain_of[unit] for unit, docs in chosen.items() for doc_id in docs if doc_id in found)
        excluded |= found.keys() | {f["copy"] for f in found.values()}
    for domain, p in plan.items():
        p["near_copied"] = near_per_domain[domain]
    return chosen, plan, near_copied, scans


@pytest.fixture(scope="module")
def corpus():
    pairs = _corpus()
    ctx, ranked = _context(pairs)
    return pairs, _reference(ctx, ranked)


def _one_scan_draw(pairs, monkeypatch, workers: int = 1):
    scanned = []
    scan = val_guard.scanned_chunks

    def counted(index, batches, workers):
        for chunk, matches in scan(index, batches, workers):
            scanned.extend(doc["id"] for doc in chunk)
            yield chunk, matches

    monkeypatch.setattr(val_guard, "scanned_chunks", counted)
    ctx, ranked = _context(pairs, workers)
    return split_step._draw_guarded(ctx, ranked), scanned


def test_one_scan_decides_what_a_scan_per_draw_did(corpus, monkeypatch):
    pairs, (chosen, plan, near_copied, scans) = corpus
    assert scans >= 4  # the redraws' replacements had copies too, draw after draw
    assert plan["short"]["near_copied"] >= 6 and plan["long"]["near_copied"] >= 1
    assert any(budget != WHOLE for budget in chosen["long-00000"].values())  # tails are drawn

    measured = []  # narrower tails answered from the documents sharing n-grams with the widest tail
    measure = val_guard.CopyPool._measure_tail
    monkeypatch.setattr(val_guard.CopyPool, "_measure_tail",
                        lambda self, doc_id, cut: measured.append(doc_id) or measure(self, doc_id, cut))
    (new_chosen, new_plan, new_near), scanned = _one_scan_draw(pairs, monkeypatch)
    assert (new_chosen, new_plan) == (chosen, plan)
    assert list(new_near.items()) == list(near_copied.items())  # the same copies named, in the same order
    assert scanned == [doc["id"] for _, doc in pairs]  # the corpus scanned once, in order
    assert measured


def test_a_draw_past_the_pool_scans_again_and_decides_the_same(corpus, monkeypatch):
    pairs, (chosen, plan, near_copied, scans) = corpus
    monkeypatch.setattr(val_guard, "POOL_MARGIN_DOCS", 0)  # a pool as deep as its own draw reaches only
    monkeypatch.setattr(val_guard, "POOL_MARGIN_CHARS", 0)
    monkeypatch.setattr(val_guard, "KEEP_CHARS", 0)  # and no narrower tail measured without a scan
    (new_chosen, new_plan, new_near), scanned = _one_scan_draw(pairs, monkeypatch)
    assert (new_chosen, new_plan, list(new_near.items())) == (chosen, plan, list(near_copied.items()))
    assert len(pairs) < len(scanned) <= scans * len(pairs)


def test_the_pool_scans_over_processes_in_order(corpus, monkeypatch):
    pairs, (chosen, plan, near_copied, _) = corpus
    monkeypatch.setattr(val_guard, "CHUNK_DOCS", 16)  # chunks for two workers, however small the corpus
    monkeypatch.setattr(split_step, "GUARD_PARALLEL_CHARS", 0)
    (new_chosen, new_plan, new_near), scanned = _one_scan_draw(pairs, monkeypatch, workers=2)
    assert (new_chosen, new_plan, list(new_near.items())) == (chosen, plan, list(near_copied.items()))
    assert scanned == [doc["id"] for _, doc in pairs]
