"""Near copies with a few percent of words changed: does document dedup find them, and what else does it remove?

    python bench/near_copies.py corpus                 # extract the text once (--root: /work/bench-near-copies)
    python bench/near_copies.py run --seed 0 1 2       # old vs new default: recall per edit level, precision, CPU
    python bench/near_copies.py sweep                  # the options the default was chosen from
    python bench/near_copies.py sample --n 20          # natural pairs newly removed by the new default, to read

Corpus (text nobody on the team wrote): the Debian Reference in en/de/es/fr/it and the Debian Administrator's
Handbook in every language installed (/usr/share/doc/debian-reference-*/docs/*.html,
/usr/share/doc/debian-handbook/html/<lang>/*.html), read by scratchlm's own HTML reader (readers.read_html_file,
html_extract "auto"); the man pages of manpages-es/-de/-fr rendered as plain text (bench/manpage_units.py render,
/work/bench-manpage-units/pages/{es,de,fr}/); and the Python standard library's .py files (compared whole, as a
source of domain "code" is).

Planted copies (seeded, see plant()): of a deterministic sample of the documents, 5% get an exact copy and 5% a
copy with k% of their words changed for each k in EDIT_LEVELS. A change replaces the word at a random position
(positions drawn without repetition, so scattered) by a word drawn from the corpus's running text (so common
words are drawn more often, as edits use them), different from the word it replaces; the layout (lines, tables,
code blocks) stays. Copies go to the end of the stream, so the original is the document kept.

The dedup runs as the data stage runs it: each document's sketch as dedup_sketch makes it (similarity_text for
prose, the whole text for code; signatures_and_counts, sampled_shingles, plus the shingle sets when the method
verifies on them), then disk_dedup.find_copies with the stage's configs and dedup_step._without_own_text (a copy
with text of its own is kept). What is measured is what the stage drops: (copy, kept) pairs with their rule.

Truth. A drop is right when the two documents are a planted pair (an original and its copy, or two copies of one
original), or when the dropped document's compared text is a near copy of the kept one's: true word-5-gram
Jaccard (words.word_shingles sets) >= TRUE_JACCARD, or containment (share of its 5-grams inside the kept one)
>= the containment threshold (0.8). TRUE_JACCARD is 0.7: a copy with 3% of its words changed at scattered
places has J = 0.97^5 / (2 - 0.97^5) = 0.75 and one with 5% changed 0.63, so 0.7 sits between "a few percent
changed" and "a twentieth of it rewritten". It is the same for every method, so their precisions compare.
Recall at an edit level: the share of planted pairs at that level that the stage finds, whatever the rule: the
copy is dropped, or its original is dropped for it (containment keeps the longer of two). Precision: the share
of the near and partial drops (exact ones aside) that are right.

The sweep swaps the verification of candidate pairs (disk_dedup.signature_jaccard) for other scorers: "pooled"
(the signature's equal slots and the containment sample's shared shingles counted together: nothing new to
store) and "sets" (the true Jaccard of the two documents' shingle hash sets: 8 bytes a word more in every
sketch), and varies banding, permutations, thresholds and the own-text rule's run length.

`run --seed 0 1 2` prints the old default, the new one, the steps between them
and unverified banding as datatrove does it, with CPU seconds per MB of text of the two dedup steps.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from scratchlm.data.readers import read_html_file  # noqa: E402

ROOT = Path("/work/bench-near-copies")
MANPAGES = Path("/work/bench-manpage-units/pages")


def _html_docs(files: list[Path], prefix: str):
    for path in files:
        for item in read_html_file(path, f"{prefix}/{path.name}"):
            if isinstance(item, dict) and item["text"].strip():
                yield item["id"], item["text"]


def corpus(root: Path) -> None:
    """Extracts every document once into root/corpus.jsonl: {"id", "source", "code", "text"}."""
    root.mkdir(parents=True, exist_ok=True)
    out = root / "corpus.jsonl"
    start, n, chars = time.process_time(), 0, 0
    with open(out, "w") as f:
        def put(doc_id: str, source: str, text: str, code: bool = False) -> None:
            nonlocal n, chars
            f.write(json.dumps({"id": doc_id, "source": source, "code": code, "text": text}) + "\n")
            n, chars = n + 1, chars + len(text)

        ref = Path("/usr/share/doc/debian-reference-en/docs")
        for doc_id, text in _html_docs(sorted(ref.glob("*.html")), "debian-reference"):
            put(doc_id, "debian-reference", text)
        handbook = Path("/usr/share/doc/debian-handbook/html")
        for lang in sorted(p.name for p in handbook.iterdir() if p.is_dir()):
            for doc_id, text in _html_docs(sorted((handbook / lang).glob("*.html")), f"handbook/{lang}"):
                put(doc_id, "debian-handbook", text)
        for lang in ("es", "de", "fr"):
            for path in sorted((MANPAGES / lang).glob("*.txt")):
                text = path.read_text(encoding="utf-8", errors="replace")
                if text.strip():
                    put(f"man/{lang}/{path.name}", "manpages", text)
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        for path in sorted(stdlib.rglob("*.py")):
            if "site-packages" in path.relative_to(stdlib).parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                put(f"stdlib/{path.relative_to(stdlib)}", "stdlib", text, code=True)
    print(f"{n} documents, {chars / 1e6:.1f} M characters in {out} ({time.process_time() - start:.0f} CPU s)")


EDIT_LEVELS = (1, 3, 5, 10)  # percent of the words changed in a planted copy
PLANT_SHARE = 0.05  # of the documents with MIN_WORDS words: this share gets an exact copy, and as many per level
MIN_WORDS = 100  # so that 1% of the words is at least one word
TRUE_JACCARD = 0.7
UNIT_DOCS = 1000
WORD = re.compile(r"[^\W_]+")


def load(root: Path) -> list[dict]:
    path = root / "corpus.jsonl"
    if not path.exists():
        sys.exit(f"{path} is missing: run `python bench/near_copies.py corpus` first")
    return [json.loads(line) for line in path.open()]


def edited(text: str, percent: int, rng: random.Random, vocabulary: list[str]) -> str:
    """`text` with percent% of its words (at least one) replaced, at scattered positions, by other words."""
    spans = [m.span() for m in WORD.finditer(text)]
    count = max(1, round(len(spans) * percent / 100))
    parts, last = [], 0
    for at in sorted(rng.sample(range(len(spans)), count)):
        start, end = spans[at]
        word = text[start:end].lower()
        replacement = rng.choice(vocabulary)
        while replacement.lower() == word:
            replacement = rng.choice(vocabulary)
        parts += [text[last:start], replacement]
        last = end
    return "".join(parts + [text[last:]])


def plant(docs: list[dict], seed: int = 0) -> tuple[list[dict], list[tuple[int, int, str]]]:
    """(the documents with the planted copies after them, [(original, copy, level)]); level "exact" or "k%"."""
    rng = random.Random(seed)
    words = [len(WORD.findall(d["text"])) for d in docs]
    eligible = [i for i, n in enumerate(words) if n >= MIN_WORDS]
    rng.shuffle(eligible)
    # the corpus's running text: a word is drawn as often as it is used (every 20th document's words)
    vocabulary = [w for d in docs[::20] for w in WORD.findall(d["text"])]
    per_level = round(PLANT_SHARE * len(eligible))
    copies = []
    for k, level in enumerate(["exact"] + [f"{p}%" for p in EDIT_LEVELS]):
        for i in sorted(eligible[k * per_level:(k + 1) * per_level]):
            text = docs[i]["text"] if level == "exact" else edited(docs[i]["text"], int(level[:-1]), rng, vocabulary)
            copies.append((docs[i]["source"], rng.random(), i, level, text))
    copies.sort()  # by source (a unit holds one source), in random order within it
    out = list(docs)
    planted = []
    for source, _, i, level, text in copies:
        planted.append((i, len(out), level))
        out.append({**docs[i], "id": f"{docs[i]['id']}#copy-{level}", "text": text})
    return out, planted


# ---------------------------------------------------------------------------------------------------------------
# The stage's sketches, per unit (dedup/sketch.py), and the stage's decisions (dedup_step.find_duplicates)


def units_of(docs: list[dict]) -> list[tuple[int, int]]:
    """[start, end) of each unit: up to UNIT_DOCS consecutive documents of one source."""
    bounds, start = [], 0
    for i in range(1, len(docs) + 1):
        if i == len(docs) or docs[i]["source"] != docs[start]["source"] or i - start == UNIT_DOCS:
            bounds.append((start, i))
            start = i
    return bounds


class _Ctx:
    """What sketch.sketch_doc and sketch.save_sketch use of a StepContext."""

    def __init__(self, settings):
        self.settings, self.memo, self.sides = settings, {}, {}


def sketch_units(docs: list[dict], units: list[tuple[int, int]], root: Path, minhash=None) -> tuple[list[Path], float]:
    """Each unit's sketch as the dedup_sketch step writes it (sketch_doc for every document, save_sketch); returns
    the unit folders and the CPU seconds it took."""
    from scratchlm.data.dedup import ContainmentConfig, MinHashConfig
    from scratchlm.data.dedup.sketch import SketchSettings, save_sketch, sketch_doc

    dirs = []
    start = time.process_time()
    for u, (lo, hi) in enumerate(units):
        ctx = _Ctx(SketchSettings(minhash or MinHashConfig(), ContainmentConfig(), docs[lo]["code"]))
        for doc in docs[lo:hi]:
            sketch_doc({"id": doc["id"], "text": doc["text"]}, ctx)
        save_sketch(ctx)
        folder = root / f"{u:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, array in ctx.sides.items():
            np.save(folder / f"{name}.npy", array)
        dirs.append(folder)
    return dirs, time.process_time() - start


def stage_drops(dirs: list[Path], code_units: np.ndarray, work: Path, fuzzy_threshold: float | None = None,
                containment_threshold: float = 0.8, minhash=None,
                own_run: int | None = None, stage: bool = True) -> tuple[dict[int, tuple[int, str]], dict, float]:
    """What dedup_step.find_duplicates drops: {copy: (kept, rule)} by document number (unit << 32 | position),
    what its own-text rule kept {copy: (kept, rule)}, and the CPU seconds it took. Defaults: the stage's."""
    from scratchlm.data import dedup_step
    from scratchlm.data.dedup import ContainmentConfig, MinHashConfig
    from scratchlm.data.dedup.disk_dedup import find_copies

    contained_cfg = ContainmentConfig(threshold=containment_threshold)
    if own_run is not None:
        contained_cfg = ContainmentConfig(threshold=containment_threshold, own_run=own_run)
    minhash = minhash or MinHashConfig()
    if fuzzy_threshold is not None:
        minhash = MinHashConfig(**{**minhash.__dict__, "threshold": fuzzy_threshold})
    start = time.process_time()
    sk, copies = find_copies(dirs, work, True, minhash, contained_cfg if stage else None, sort_mb=256)
    if stage:
        (near, _), _ = dedup_step._without_own_text(sk, copies.near, copies.near_jaccard, code_units, contained_cfg)
        (part, _), _ = dedup_step._without_own_text(sk, copies.contained, copies.contained_share, code_units,
                                                    contained_cfg)
    else:
        near, part = copies.near, copies.contained
    seconds = time.process_time() - start
    drops = {}
    for rule, pairs in (("exact", copies.exact), ("near", near), ("contained", part)):
        drops |= {int(c): (int(k), rule) for c, k in pairs.tolist()}
    own = {}
    for rule, pairs in (("near", copies.near), ("contained", copies.contained)):
        own |= {int(c): (int(k), rule) for c, k in pairs.tolist() if int(c) not in drops}
    return drops, own, seconds


# ---------------------------------------------------------------------------------------------------------------
# Verification variants for the sweep: disk_dedup.near_copies verifies its candidate pairs with
# disk_dedup.signature_jaccard; the sweep swaps that function for another scorer of (copy, earlier) pairs.


def compared_texts(docs: list[dict]) -> list[str]:
    """The text the stage compares: the whole of a code file, similarity_text of anything else."""
    from scratchlm.data.clean.structure import similarity_text

    return [d["text"] if d["code"] else similarity_text(d["text"]) for d in docs]


def save_sets(texts: list[str], units: list[tuple[int, int]], dirs: list[Path], seed: int) -> float:
    """Each document's distinct word-5-gram hashes (minhash.shingle_hashes), beside its unit's sketch as
    set.npy / set_at.npy; returns the CPU seconds."""
    from scratchlm.data.dedup.minhash import shingle_hashes

    start = time.process_time()
    for (lo, hi), folder in zip(units, dirs):
        sets, at = [], [0]
        for b in range(lo, hi, 1024):
            hashes, offsets = shingle_hashes(texts[b:min(b + 1024, hi)], 5, seed)
            doc = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
            pairs = np.unique(np.stack([doc, hashes.view(np.int64)], axis=1), axis=0)
            sets.append(pairs[:, 1])
            at += (at[-1] + np.cumsum(np.bincount(pairs[:, 0], minlength=len(offsets) - 1))).tolist()
        np.save(folder / "set.npy", np.concatenate(sets))
        np.save(folder / "set_at.npy", np.array(at, dtype=np.int64))
    return time.process_time() - start


def _members(sk, name: str, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row of `docs`, value) of every member of each document's set `name` (name.npy, name_at.npy)."""
    from scratchlm.data.dedup.disk_dedup import local, unit_of
    from scratchlm.data.dedup.minhash import ranges

    rows, values = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    units = unit_of(docs)
    for u in np.unique(units).tolist():
        at = np.flatnonzero(units == u)
        bounds = np.asarray(sk.load(u, f"{name}_at"))
        starts, ends = bounds[local(docs[at])], bounds[local(docs[at]) + 1]
        rows.append(np.repeat(at, ends - starts))
        values.append(np.asarray(sk.load(u, name))[ranges(starts, ends - starts)])
    return np.concatenate(rows), np.concatenate(values)


def set_overlap(sk, pairs: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shared members, size of the first set, size of the second) for each pair of documents."""
    rows_a, values_a = _members(sk, name, pairs[:, 0])
    rows_b, values_b = _members(sk, name, pairs[:, 1])
    rows, values = np.concatenate([rows_a, rows_b]), np.concatenate([values_a, values_b])
    order = np.lexsort((values, rows))
    rows, values = rows[order], values[order]
    twice = (rows[1:] == rows[:-1]) & (values[1:] == values[:-1])  # each set is distinct: twice = in both
    shared = np.bincount(rows[1:][twice], minlength=len(pairs))
    return shared, np.bincount(rows_a, minlength=len(pairs)), np.bincount(rows_b, minlength=len(pairs))


def scorer(kind: str):
    """A replacement for disk_dedup.signature_jaccard: "signature" (the stage's), "pooled" (the signature's equal
    slots and the containment sample's shared shingles counted together), "sets" (the true Jaccard of the two
    documents' shingle hash sets)."""
    from scratchlm.data.dedup import disk_dedup

    original = disk_dedup.signature_jaccard

    def pooled(sk, pairs):
        if not len(pairs):
            return np.empty(0)
        equal = original(sk, pairs) * sk.load(0, "sig").shape[1]
        shared, a, b = set_overlap(sk, pairs, "sample")
        return (equal + shared) / (sk.load(0, "sig").shape[1] + a + b - shared)

    def sets(sk, pairs):
        if not len(pairs):
            return np.empty(0)
        shared, a, b = set_overlap(sk, pairs, "set")
        return shared / np.maximum(a + b - shared, 1)

    return {"signature": original, "pooled": pooled, "sets": sets}[kind]


class swapped_scorer:
    def __init__(self, kind: str):
        from scratchlm.data.dedup import disk_dedup

        self.module, self.kind = disk_dedup, kind

    def __enter__(self):
        self.saved = self.module.signature_jaccard
        self.module.signature_jaccard = scorer(self.kind)

    def __exit__(self, *exc):
        self.module.signature_jaccard = self.saved


# ---------------------------------------------------------------------------------------------------------------
# Truth and scores


class Truth:
    """True word-5-gram Jaccard and containment (words.word_shingles sets of the compared texts), on demand."""

    def __init__(self, texts: list[str], family: list[int]):
        self.texts, self.family, self._sets = texts, family, {}

    def shingles(self, i: int) -> set:
        from scratchlm.data.dedup.words import word_shingles

        if i not in self._sets:
            self._sets[i] = set(word_shingles(self.texts[i]))
        return self._sets[i]

    def jaccard(self, a: int, b: int) -> float:
        sa, sb = self.shingles(a), self.shingles(b)
        return len(sa & sb) / len(sa | sb) if sa or sb else 1.0

    def containment(self, a: int, b: int) -> float:
        """Share of a's shingles inside b."""
        sa = self.shingles(a)
        return len(sa & self.shingles(b)) / len(sa) if sa else 1.0

    def right(self, copy: int, kept: int, containment_threshold: float = 0.8) -> bool:
        return (self.family[copy] == self.family[kept] or self.jaccard(copy, kept) >= TRUE_JACCARD
                or self.containment(copy, kept) >= containment_threshold)


# ---------------------------------------------------------------------------------------------------------------
# The runs


class Planted:
    """The corpus with its planted copies, sketched as the stage sketches it."""

    def __init__(self, root: Path, seed: int = 0, sets: bool = False):
        import shutil

        docs, self.planted = plant(load(root), seed)
        self.n_natural = len(docs) - len(self.planted)
        self.docs = docs
        self.units = units_of(docs)
        self.unit_start = np.array([lo for lo, _ in self.units], dtype=np.int64)
        self.code_units = np.array([docs[lo]["code"] for lo, _ in self.units], dtype=bool)
        self.mb = sum(len(d["text"].encode()) for d in docs) / 1e6
        self.work = root / "work"
        shutil.rmtree(self.work, ignore_errors=True)
        family = list(range(len(docs)))
        for original, copy, _ in self.planted:
            family[copy] = original
        self.texts = compared_texts(docs)
        self.truth = Truth(self.texts, family)
        self.sets = sets
        self.sketch_cpu: dict[int, float] = {}
        self.sets_cpu: float | None = None
        self._dirs: dict[int, list[Path]] = {}

    def dirs(self, num_perm: int) -> list[Path]:
        """The units' sketches at num_perm permutations (made on first use; the CPU seconds in sketch_cpu)."""
        from scratchlm.data.dedup import MinHashConfig

        if num_perm not in self._dirs:
            cfg = MinHashConfig(num_perm=num_perm, bands=1, rows=1)  # banding is applied when deciding
            self._dirs[num_perm], self.sketch_cpu[num_perm] = sketch_units(self.docs, self.units,
                                                                          self.work / f"sketch-{num_perm}", cfg)
            if self.sets:
                self.sets_cpu = save_sets(self.texts, self.units, self._dirs[num_perm], 1)
        return self._dirs[num_perm]

    def index(self, doc: int) -> int:
        return int(self.unit_start[doc >> 32] + (doc & 0xFFFFFFFF))

    def drops(self, fuzzy_threshold: float | None = None, containment_threshold: float = 0.8, minhash=None,
              verify: str | None = None, own_run: int | None = None, stage: bool = True):
        """({copy: (kept, rule)}, {copy kept for its own text: (original, rule)}, CPU s) by corpus index. Without
        `stage`, near copies only: no partial copies, no own-text rule (as datatrove's MinHash stages)."""
        import contextlib
        import shutil

        from scratchlm.data.dedup import MinHashConfig

        minhash = minhash or MinHashConfig()
        shutil.rmtree(self.work / "scratch", ignore_errors=True)
        with swapped_scorer(verify) if verify else contextlib.nullcontext():
            drops, own, cpu = stage_drops(self.dirs(minhash.num_perm), self.code_units, self.work / "scratch",
                                          fuzzy_threshold, containment_threshold, minhash, own_run, stage)
        return ({self.index(c): (self.index(k), r) for c, (k, r) in drops.items()},
                {self.index(c): (self.index(k), r) for c, (k, r) in own.items()}, cpu)

    def found(self, pairs: dict, original: int, copy: int) -> bool:
        """The planted pair is among `pairs` ({copy: (kept, rule)}): the copy went, or the original went and its
        copy stayed in its place (containment keeps the longer of the two)."""
        return copy in pairs or (original in pairs and self.truth.family[pairs[original][0]] == original)

    def natural(self, drops: dict) -> list[int]:
        """The natural documents dropped as near or partial copies, less originals dropped for their own copy."""
        return [c for c, (k, rule) in drops.items()
                if c < self.n_natural and rule != "exact" and self.truth.family[k] != c]

    def score(self, drops: dict, own: dict, containment_threshold: float = 0.8) -> dict:
        levels = ["exact"] + [f"{p}%" for p in EDIT_LEVELS]
        recall, own_kept = {}, {}
        for level in levels:
            pairs = [(o, c) for o, c, lv in self.planted if lv == level]
            recall[level] = sum(self.found(drops, o, c) for o, c in pairs) / len(pairs)
            own_kept[level] = sum(self.found(own, o, c) and not self.found(drops, o, c) for o, c in pairs) / len(pairs)
        judged = {c: self.truth.right(c, k, containment_threshold) for c, (k, rule) in drops.items()
                  if rule != "exact"}
        return {"recall": recall, "own_kept": own_kept,
                "precision": sum(judged.values()) / max(len(judged), 1), "judged": len(judged),
                "wrong": sorted(c for c, ok in judged.items() if not ok), "natural_near": len(self.natural(drops))}


def _table_header() -> str:
    levels = ["exact"] + [f"{p}%" for p in EDIT_LEVELS]
    return (f"{'method':44s} " + " ".join(f"{lv:>6s}" for lv in levels) + f" {'prec':>6s} {'wrong':>5s} "
            f"{'natural':>7s} {'CPU s':>6s} {'s/MB':>5s}")


def _table_row(name: str, m: dict, cpu: float, mb: float) -> str:
    return (f"{name:44s} " + " ".join(f"{v:6.3f}" for v in m["recall"].values()) +
            f" {m['precision']:6.3f} {len(m['wrong']):5d} {m['natural_near']:7d} {cpu:6.1f} {cpu / mb:5.2f}")


SWEEP = {  # num_perm: [(bands, rows, verification, threshold)]
    112: [(14, 8, "signature", 0.8), (14, 8, "signature", 0.75), (14, 8, "signature", 0.7),
          (16, 7, "signature", 0.7), (20, 5, "signature", 0.75), (20, 5, "signature", 0.7),
          (28, 4, "signature", 0.7), (20, 5, "pooled", 0.75), (20, 5, "pooled", 0.7), (28, 4, "pooled", 0.7),
          (16, 7, "sets", 0.7), (20, 5, "sets", 0.75), (20, 5, "sets", 0.7), (28, 4, "sets", 0.7),
          (20, 5, "sets", 0.65)],
    256: [(20, 5, "signature", 0.75), (20, 5, "signature", 0.72), (20, 5, "signature", 0.7),
          (25, 5, "signature", 0.7), (32, 4, "signature", 0.7), (20, 5, "pooled", 0.72), (20, 5, "pooled", 0.7)],
}


def sweep(root: Path, seed: int, own_runs: list[int], containments: list[float], perms: list[int]) -> None:
    from scratchlm.data.dedup import MinHashConfig

    print(f"recall per planted level; precision of the near and partial drops (truth: planted pair, or J >= "
          f"{TRUE_JACCARD}, or containment >= the containment threshold); natural: natural documents dropped as "
          "near or partial copies; CPU: find_copies + own-text rule; own-kept: planted pairs kept for their own text")
    for num_perm in perms:
        run = Planted(root, seed, sets=any(v == "sets" for _, _, v, _ in SWEEP[num_perm]))
        run.dirs(num_perm)
        print(f"\n{num_perm} permutations. corpus: {run.n_natural} documents + {len(run.planted)} planted copies, "
              f"{run.mb:.1f} MB; sketch {run.sketch_cpu[num_perm]:.1f} CPU s "
              f"({run.sketch_cpu[num_perm] / run.mb:.2f} s/MB)" +
              (f", shingle sets {run.sets_cpu:.1f} CPU s" if run.sets_cpu else ""))
        print(_table_header())
        for own_run in own_runs:
            for containment in containments:
                for bands, rows, verify, threshold in SWEEP[num_perm]:
                    cfg = MinHashConfig(num_perm=num_perm, bands=bands, rows=rows)
                    drops, own, cpu = run.drops(threshold, containment, cfg, verify, own_run)
                    m = run.score(drops, own, containment)
                    name = f"{num_perm}p {bands}x{rows} {verify} {threshold} c{containment} run{own_run}"
                    print(_table_row(name, m, cpu, run.mb) + "  own-kept " +
                          " ".join(f"{v:.2f}" for v in m["own_kept"].values()), flush=True)
                print()


def _old_and_new():
    """The old default (before this benchmark) and the new one, as (MinHashConfig, own_run)."""
    from scratchlm.data.dedup import ContainmentConfig, MinHashConfig

    return (MinHashConfig(num_perm=112, bands=14, rows=8, threshold=0.8), 1), (MinHashConfig(),
                                                                               ContainmentConfig().own_run)


def compare(root: Path, seeds: list[int]) -> None:
    """Old vs new default through the stage, with the steps between them, and datatrove-like unverified banding."""
    from scratchlm.data.dedup import MinHashConfig

    (old, old_run), (new, new_run) = _old_and_new()
    unverified = 1e-6  # every candidate pair passes: each shares a whole band, so at least `rows` equal slots
    rows = [
        ("old default: 112p 14x8 0.8, own = all", old, old_run, 0.8, True),
        ("old MinHash, own text in passages", old, new_run, 0.8, True),
        ("new MinHash, own = all", new, old_run, 0.8, True),
        ("new default: 256p 20x5 0.7, own passages", new, new_run, 0.8, True),
        ("new default, containment 0.7", new, new_run, 0.7, True),
        ("112p 14x8 unverified, near only (datatrove)", MinHashConfig(num_perm=112, bands=14, rows=8,
                                                                      threshold=unverified), new_run, 0.8, False),
        ("256p 20x5 unverified, near only", MinHashConfig(threshold=unverified), new_run, 0.8, False),
    ]
    print(f"recall per planted level (a pair is found when the copy, or its original for it, is dropped); prec: "
          f"share of the near and partial drops that are true (planted pair, or true J >= {TRUE_JACCARD}, or "
          f"containment >= the containment threshold); natural: natural documents dropped as near or partial "
          f"copies; CPU: sketch (dedup_sketch) + find (find_copies, own-text rule), per MB of text")
    for seed in seeds:
        run = Planted(root, seed)
        levels = ["exact"] + [f"{p}%" for p in EDIT_LEVELS]
        print(f"\nseed {seed}: {run.n_natural} documents + {len(run.planted)} planted copies "
              f"({len(run.planted) // len(levels)} per level), {run.mb:.1f} MB")
        print(f"{'':44s} " + " ".join(f"{lv:>6s}" for lv in levels) +
              f" {'prec':>6s} {'wrong':>5s} {'natural':>7s} {'sketch':>7s} {'find':>6s}")
        naturals = {}
        for name, cfg, own_run, containment, stage in rows:
            drops, own, cpu = run.drops(cfg.threshold, containment, cfg, None, own_run, stage)
            m = run.score(drops, own)  # one truth for every row: containment >= 0.8
            naturals[name] = set(run.natural(drops))
            print(f"{name:44s} " + " ".join(f"{v:6.3f}" for v in m["recall"].values()) +
                  f" {m['precision']:6.3f} {len(m['wrong']):5d} {m['natural_near']:7d} "
                  f"{run.sketch_cpu[cfg.num_perm] / run.mb:7.3f} {cpu / run.mb:6.3f}", flush=True)
        old_set, new_set = naturals[rows[0][0]], naturals[rows[3][0]]
        print(f"natural documents dropped as near or partial copies: old {len(old_set)}, new {len(new_set)}: "
              f"{len(new_set - old_set)} newly, {len(old_set - new_set)} no longer")


def _difference(a: str, b: str, limit: int = 6) -> str:
    """Where the words of a and b differ (difflib), the first `limit` places, each cut short."""
    import difflib

    from scratchlm.data.dedup.words import normalize_words

    wa, wb = normalize_words(a), normalize_words(b)
    ops = [op for op in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes() if op[0] != "equal"]
    lines = [f"      {len(wa)} / {len(wb)} words, {len(ops)} places differ, "
             f"{sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in ops)} words in them"]
    for op, i1, i2, j1, j2 in ops[:limit]:
        lines.append(f"      {op:7s} {' '.join(wa[i1:i2])[:70]!r} -> {' '.join(wb[j1:j2])[:70]!r}")
    return "\n".join(lines)


def sample(root: Path, n: int, seed: int) -> None:
    """Natural documents dropped by the new default and not by the old: n spread evenly over them by ID."""
    (old, old_run), (new, new_run) = _old_and_new()
    run = Planted(root, seed)
    old_drops, _, _ = run.drops(old.threshold, 0.8, old, None, old_run)
    new_drops, _, _ = run.drops(new.threshold, 0.8, new, None, new_run)
    newly = sorted(set(run.natural(new_drops)) - set(run.natural(old_drops)), key=lambda c: run.docs[c]["id"])
    print(f"{len(newly)} natural documents newly dropped as near or partial copies; {min(n, len(newly))} of them:")
    step = max(len(newly) / n, 1.0)
    for i in range(min(n, len(newly))):
        c = newly[int(i * step)]
        k, rule = new_drops[c]
        print(f"\n[{i + 1}] {run.docs[c]['id']}  dropped as {rule} copy of  {run.docs[k]['id']}\n"
              f"      true J {run.truth.jaccard(c, k):.3f}, containment {run.truth.containment(c, k):.3f}")
        print(_difference(run.texts[c], run.texts[k]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["corpus", "run", "sweep", "sample"])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--seed", type=int, nargs="+", default=[0])
    parser.add_argument("--n", type=int, default=20, help="sample: how many")
    parser.add_argument("--own-run", type=int, nargs="+", default=[1, 6], help="sweep: containment own_run values")
    parser.add_argument("--containment", type=float, nargs="+", default=[0.8], help="sweep: containment thresholds")
    parser.add_argument("--perms", type=int, nargs="+", default=list(SWEEP), help="sweep: num_perm values")
    args = parser.parse_args()
    if args.command == "corpus":
        corpus(args.root)
    elif args.command == "run":
        compare(args.root, args.seed)
    elif args.command == "sweep":
        sweep(args.root, args.seed[0], args.own_run, args.containment, args.perms)
    else:
        sample(args.root, args.n, args.seed[0])


if __name__ == "__main__":
    main()
