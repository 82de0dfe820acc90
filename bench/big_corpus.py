"""Peak memory and wall time of the data stage (`scratchlm data prepare`) as the corpus grows.

Does the stage's memory stay flat while the corpus grows, and does its time grow linearly? For each scale this
generates a corpus of short documents, prepares it in a fresh workdir by a subprocess, and, while that runs,
reads from /proc every 0.2 s the resident memory (VmRSS) of the subprocess and of every process under it.

The corpus: `--docs` x scale short documents (3-8 sentences, about 300-800 characters) drawn, seeded, from a pool
of sentences of real English on this machine (/usr/share/common-licenses, /usr/share/doc/*/copyright, and the
descriptions in the venv's *.dist-info/METADATA), with planted duplicates for the dedup steps: about 4% exact
copies of an earlier document, 4% near copies (one or two words changed, or one sentence appended) and 2% an
earlier document followed by another paragraph. It is streamed to JSONL files of at most 64 MB, never held in
memory. The same seed gives the same corpus, and a larger scale's corpus starts with the smaller one's documents.

    cd /tmp && /work/main/.venv/bin/python /work/main/bench/big_corpus.py \\
        --docs 3000 --scales 1,2 --work /tmp/bigbench --out /tmp/bigbench.json

(`--scales 1,4,16` for the growth curve; `--executor ray` to run the per-shard steps as Ray tasks.)

Reading the figures: with the project's unit_mb (64) a corpus under 64 MB is one work unit, which the stage runs
in its main process without a pool, so "max worker" is 0 there; `--unit-mb 1` makes the small scales use the two
workers. About a third of the documents have fewer than 5 sentences and are dropped by the prose profile's
c4_min_sentences rule: that is the stage working, not a fault of the generator.
Writes the per-scale figures and per-process table to `--out`; prints a Markdown table and each scale's
main-process peak relative to the 1x one.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
FILE_BYTES = 64 * 1024 * 1024  # one JSONL file at most: a corpus of many files, as a real one arrives
RESERVOIR = 4096  # earlier documents that copies are drawn from: bounded memory, copies from the whole corpus
PLANTED = (("exact", 0.04), ("near", 0.04), ("extra_paragraph", 0.02))
MARKER = ".big_corpus_bench"  # marks a scale's directory as ours, so that a rerun may delete it


# ---- the sentence pool -------------------------------------------------------------------------------------------

def _texts() -> list[str]:
    """Real English prose on this machine: license texts, packages' copyright files, packages' descriptions."""
    files = [p for p in sorted(Path("/usr/share/common-licenses").glob("*")) if p.is_file()]
    files += sorted(Path("/usr/share/doc").glob("*/copyright"))
    texts = []
    for path in files:
        try:
            texts.append(path.read_text(errors="replace"))
        except OSError:  # a dangling link or an unreadable file: the pool does without it
            continue
    for meta in sorted((REPO / ".venv/lib").glob("python3*/site-packages/*.dist-info/METADATA")):
        # The description is the body after the first blank line; the headers above it are not prose.
        texts.append(meta.read_text(errors="replace").partition("\n\n")[2])
    return texts


# Markup, addresses and field syntax: a sentence holding one is a listing, not prose, and would be dropped by
# the quality filters for the wrong reason.
_NOT_PROSE = re.compile(r"@|://|www\.|\(c\)|==|::|[`|<>{}\[\]#*_\\\t]", re.IGNORECASE)
_ABBREVIATION = re.compile(r"(\b\w|\w\.\w)\.$")  # "Dana L." or "(e.g.": cut inside a sentence, not its end


_NUMBERING = re.compile(r"\s+\(?\d{1,2}[.)]$")
_FIELD = re.compile(r"^[A-Z][\w-]*: ")  # "License: GPL-3+ ...", a Debian copyright field, not a sentence start


def _is_sentence(s: str) -> bool:
    words = s.split()
    if not 6 <= len(words) <= 40 or not s[0].isupper() or s[-1] not in ".!?":
        return False
    if _NOT_PROSE.search(s) or _FIELD.match(s) or _ABBREVIATION.search(s):
        return False
    ascii_share = sum(c.isascii() for c in s) / len(s)
    letter_share = sum(c.isalpha() or c.isspace() for c in s) / len(s)
    return ascii_share >= 0.98 and letter_share >= 0.9


def sentence_pool() -> list[str]:
    """Every distinct sentence of 6-40 words, sorted so that the same machine always gives the same pool."""
    pool = set()
    for text in _texts():
        # Debian copyright files separate paragraphs with a lone "."; joined into the text it would glue sentences.
        lines = (line.strip() for line in text.splitlines())
        flat = " ".join(line for line in lines if line not in (".", ""))
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", flat):
            s = _NUMBERING.sub("", s)  # "... this License. 12." : the next clause's number, not this sentence's
            if _is_sentence(s):
                pool.add(s)
    return sorted(pool)


# ---- the corpus ------------------------------------------------------------------------------------------------

class DocumentMaker:
    """Seeded documents: fresh ones from the pool, and the planted copies of earlier ones."""

    def __init__(self, pool: list[str], seed: int):
        self.pool, self.rng = pool, random.Random(seed)
        self.vocabulary = sorted({w for s in pool[:2000] for w in s.split() if w.isalpha() and len(w) > 3})
        self.earlier: list[str] = []  # a reservoir sample of the originals so far
        self.originals = 0

    def fresh(self, low: int = 3, high: int = 8) -> str:
        """low..high sentences, trimmed or topped up towards 300-800 characters."""
        sentences = [self.rng.choice(self.pool) for _ in range(self.rng.randint(low, high))]
        while len(sentences) > low and sum(map(len, sentences)) > 800:
            sentences.pop()
        while len(sentences) < high and sum(map(len, sentences)) < 300:
            sentences.append(self.rng.choice(self.pool))
        return " ".join(sentences)

    def near(self, text: str) -> str:
        """One or two words changed, or one sentence appended: what re-crawled or lightly edited pages look like."""
        if self.rng.random() < 0.5:
            return text + " " + self.rng.choice(self.pool)
        words = text.split(" ")
        for _ in range(self.rng.randint(1, 2)):
            words[self.rng.randrange(len(words))] = self.rng.choice(self.vocabulary)
        return " ".join(words)

    def _remember(self, text: str) -> None:
        # Reservoir sampling (Algorithm R): every original so far is equally likely to be copied, in fixed memory.
        self.originals += 1
        if len(self.earlier) < RESERVOIR:
            self.earlier.append(text)
        elif (j := self.rng.randrange(self.originals)) < RESERVOIR:
            self.earlier[j] = text

    def next(self) -> tuple[str, str]:
        """(kind, text) of the next document; kind is "original" or one of PLANTED's."""
        r, edge = self.rng.random(), 0.0
        for kind, share in PLANTED:
            edge += share
            if self.earlier and r < edge:
                source = self.rng.choice(self.earlier)
                if kind == "exact":
                    return kind, source
                if kind == "near":
                    return kind, self.near(source)
                return kind, source + "\n\n" + self.fresh(3, 6)
        text = self.fresh()
        self._remember(text)
        return "original", text


def write_corpus(directory: Path, n: int, pool: list[str], seed: int) -> dict:
    """n documents as JSONL files of at most FILE_BYTES each, streamed: one document in memory at a time."""
    directory.mkdir(parents=True)
    maker, kinds = DocumentMaker(pool, seed), {"original": 0, **{k: 0 for k, _ in PLANTED}}

    def lines():
        for _ in range(n):
            kind, text = maker.next()
            kinds[kind] += 1
            yield (json.dumps({"text": text}) + "\n").encode()

    stream = lines()
    pending, files, size = next(stream, None), 0, 0
    while pending is not None:
        with open(directory / f"part-{files:05d}.jsonl", "wb") as f:
            written = 0
            while pending is not None and (written == 0 or written + len(pending) <= FILE_BYTES):
                f.write(pending)
                written += len(pending)
                pending = next(stream, None)
        files, size = files + 1, size + written
    return {"files": files, "bytes": size, "planted": kinds}


# ---- running the stage and watching its processes --------------------------------------------------------------

def write_config(workdir: Path, executor: str, unit_mb: int | None, sort_mb: int | None) -> Path:
    extra = "".join(f"{k} = {v}\n" for k, v in (("unit_mb", unit_mb), ("sort_mb", sort_mb)) if v is not None)
    path = workdir / "scratchlm.toml"
    path.write_text(f"""[run]
workdir = "run"
[data]
workers = 2
min_chars = 100
languages = ["en"]
executor = "{executor}"
{extra}
[[data.sources]]
name = "synthetic"
domain = "web"
path = "corpus/*.jsonl"
format = "jsonl"
""")
    return path


def _descendants(root: int) -> list[int]:
    """root and every live process under it. Each thread's `children` file lists the children it started, so a
    worker started from a pool's helper thread is found too."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                todo += [int(c) for c in children.read_text().split()]
            except OSError:  # the thread or the process just ended
                continue
    return found


def _status_mib(pid: int) -> dict[str, float]:
    """VmRSS (resident now) and VmHWM (the kernel's own high-water mark, which catches spikes between samples)."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    except OSError:  # the process just ended
        pass
    return out


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    line = " ".join(a for a in argv if a)
    if not line:
        return ""
    # A spawned pool worker's command line is a long `-c "from multiprocessing.spawn ..."`: name it instead.
    for marker, name in (("multiprocessing.spawn", "spawn worker"), ("multiprocessing.forkserver", "forkserver"),
                         ("multiprocessing.resource_tracker", "resource_tracker")):
        if marker in line:
            return f"{name} ({Path(argv[0]).name})"
    return line[:100]


def watch(proc: subprocess.Popen, period: float) -> dict:
    """Sample the process tree until proc exits: per process its peak VmRSS, and the peak of their sum."""
    procs: dict[int, dict] = {}
    total_peak, samples = 0.0, 0
    while proc.poll() is None:
        now = 0.0
        for pid in _descendants(proc.pid):
            mem = _status_mib(pid)
            if not mem:
                continue
            entry = procs.setdefault(pid, {"pid": pid, "cmd": "", "peak_rss_mib": 0.0, "hwm_mib": 0.0})
            entry["cmd"] = entry["cmd"] or _command(pid)  # empty while a new process is still in exec: ask again
            entry["peak_rss_mib"] = max(entry["peak_rss_mib"], mem.get("VmRSS", 0.0))
            entry["hwm_mib"] = max(entry["hwm_mib"], mem.get("VmHWM", 0.0))
            now += mem.get("VmRSS", 0.0)
        total_peak, samples = max(total_peak, now), samples + 1
        time.sleep(period)
    return {"processes": sorted(procs.values(), key=lambda p: p["pid"]), "total_peak_rss_mib": total_peak,
            "samples": samples}


def _stats(workdir: Path) -> dict:
    """What the stage reports of itself, from its stats.json; {} when it wrote none."""
    found = sorted((workdir / "run" / "data").glob("*/stats.json"))
    if not found:
        return {}
    stats = json.loads(found[-1].read_text())
    sources = stats.get("sources", {}).values()
    dedup = {k: v["duplicates"] for k, v in stats.get("dedup", {}).items()
             if isinstance(v, dict) and "duplicates" in v}
    return {"docs_in": sum(s.get("docs_in", 0) for s in sources),
            "docs_kept": sum(s.get("docs_kept", 0) for s in sources), "dedup_duplicates": dedup,
            "step_seconds": stats.get("seconds", {}), "step_peak_mib": stats.get("peak_mib", {})}


def run_prepare(python: Path, config: Path, period: float) -> dict:
    workdir = config.parent
    env = {**os.environ, "SCRATCHLM_PROGRESS": "0"}  # progress bars would only fill the log
    with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(python), "-m", "scratchlm", "data", "prepare", "--config", str(config)],
                                cwd=workdir, stdout=out, stderr=err, env=env)
        seen = watch(proc, period)
        wall = time.perf_counter() - t0
    result = {"returncode": proc.returncode, "wall_s": wall, **seen}
    procs = seen["processes"]
    main = next((p for p in procs if p["pid"] == proc.pid), {"peak_rss_mib": 0.0, "hwm_mib": 0.0})
    result["main_peak_rss_mib"], result["main_hwm_mib"] = main["peak_rss_mib"], main["hwm_mib"]
    result["max_worker_peak_rss_mib"] = max((p["peak_rss_mib"] for p in procs if p["pid"] != proc.pid), default=0.0)
    if proc.returncode:
        result["error"] = (workdir / "stderr.txt").read_text(errors="replace")[-4000:]
    result["stats"] = _stats(workdir)
    return result


# ---- one scale, and the report ---------------------------------------------------------------------------------

def fresh_dir(path: Path) -> Path:
    """An empty directory at path; deletes a previous one only if this script made it."""
    if path.exists():
        if not (path / MARKER).exists():
            raise SystemExit(f"{path} exists and was not made by this script: choose another --work")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).touch()
    return path


def run_scale(args: argparse.Namespace, pool: list[str], scale: int) -> dict:
    workdir = fresh_dir(args.work / f"x{scale}")
    n = args.docs * scale
    t0 = time.perf_counter()
    corpus = write_corpus(workdir / "corpus", n, pool, args.seed)
    generate_s = time.perf_counter() - t0
    config = write_config(workdir, args.executor, args.unit_mb, args.sort_mb)
    print(f"x{scale}: {n:,} documents, {corpus['bytes'] / 1e6:.1f} MB in {corpus['files']} file(s), "
          f"generated in {generate_s:.1f} s; preparing ...", flush=True)
    run = run_prepare(args.python, config, args.period)
    result = {"scale": scale, "docs": n, "input_bytes": corpus["bytes"], "input_files": corpus["files"],
              "planted": corpus["planted"], "generate_s": generate_s, "workdir": str(workdir), **run,
              "docs_per_s": n / run["wall_s"]}
    if "error" in run:
        print(f"x{scale}: data prepare exited {run['returncode']}:\n{run['error']}", file=sys.stderr, flush=True)
    return result


def print_table(results: list[dict]) -> None:
    print("\n| scale | docs | MB | wall s | docs/s | main peak MiB | max worker peak MiB | total peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        failed = " (failed)" if r["returncode"] else ""
        print(f"| {r['scale']}x{failed} | {r['docs']:,} | {r['input_bytes'] / 1e6:.1f} | {r['wall_s']:.1f} | "
              f"{r['docs_per_s']:.0f} | {r['main_peak_rss_mib']:.0f} | {r['max_worker_peak_rss_mib']:.0f} | "
              f"{r['total_peak_rss_mib']:.0f} |")
    base = next((r for r in results if r["scale"] == 1), results[0])
    if base["main_peak_rss_mib"]:
        ratios = ", ".join(f"{r['scale']}x {r['main_peak_rss_mib'] / base['main_peak_rss_mib']:.2f}" for r in results)
        print(f"\nmain-process peak relative to {base['scale']}x: {ratios}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=20_000, help="documents at scale 1")
    ap.add_argument("--scales", default="1,4,16", help="comma-separated multiples of --docs")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bigbench"), help="one x<scale> workdir each, in here")
    ap.add_argument("--out", type=Path, default=Path("bigbench.json"))
    ap.add_argument("--executor", choices=("local", "ray"), default="local", help="[data] executor")
    ap.add_argument("--unit-mb", type=int, default=None, help="[data] unit_mb (default: the project's)")
    ap.add_argument("--sort-mb", type=int, default=None, help="[data] sort_mb (default: the project's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--period", type=float, default=0.2, help="seconds between memory samples")
    ap.add_argument("--python", type=Path, default=VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable),
                    help="the interpreter that runs `-m scratchlm` (default: the repository's venv)")
    args = ap.parse_args()
    args.scales = [int(s) for s in args.scales.split(",")]
    args.work = args.work.resolve()
    return args


def main() -> int:
    args = parse_args()
    t0 = time.perf_counter()
    pool = sentence_pool()
    print(f"sentence pool: {len(pool):,} distinct sentences in {time.perf_counter() - t0:.1f} s; "
          f"{os.cpu_count()} cores visible", flush=True)
    results = [run_scale(args, pool, scale) for scale in args.scales]
    args.out.write_text(json.dumps({"command": [sys.executable, *sys.argv], "sentences": len(pool),
                                    "executor": args.executor, "cores": os.cpu_count(), "results": results},
                                   indent=1))
    print_table(results)
    print(f"\nper-process tables and the stage's own stats: {args.out}")
    return 1 if any(r["returncode"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
