"""Peak memory and wall time of `scratchlm data prepare` as the corpus grows: is memory flat, is time linear?

The corpus is generated, seeded and streamed to disk: documents of 2-4 paragraphs recombined from the sentences of
real text on this machine (the built-in corpus's pydoc topics and package descriptions, Debian's license texts),
with planted copies: 4% exact, 4% near (one word changed), 2% an earlier document with a paragraph added (a
partial copy), and in 10% of documents one of 40 stock paragraphs (template text for paragraph dedup).
Each scale is prepared in a fresh workdir by a subprocess, while a thread reads the resident memory of it and
every process it started from /proc every 0.2 s.

The work units (`unit_mb`) and one on-disk sort (`sort_mb`) bound what a process holds; they are set small here
(4 MB, 16 MB) so that the smallest scale already fills them, as a 10B-token corpus fills the defaults.

    python bench/big_corpus.py --docs 25000 --scales 1,4,16 --work /tmp/bigbench --out bigbench.json
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

STOCK = 40  # template paragraphs shared by many documents


def sentence_pool(work: Path) -> list[str]:
    from scratchlm.data.builtin import build_builtin_corpus

    corpus = build_builtin_corpus(work / "builtin", code_max_chars=0)
    texts = [json.loads(line)["text"] for d in ("docs", "web") for line in corpus[d].read_text().splitlines()]
    texts += [p.read_text(errors="replace") for p in sorted(Path("/usr/share/common-licenses").glob("*"))
              if p.is_file()]
    pool = set()
    for text in texts:
        for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
            if 6 <= len(s.split()) <= 40 and s.isascii() and s[0].isupper() and s[-1] in ".!?":
                pool.add(s)
    return sorted(pool)


def generate(path: Path, n: int, pool: list[str], seed: int = 1) -> int:
    """n documents into `path` (JSONL); returns its size in bytes. Copies refer to the last 5,000 originals."""
    rng = random.Random(seed)

    def paragraph() -> str:
        return " ".join(rng.choice(pool) for _ in range(rng.randint(2, 5)))

    stock = [paragraph() for _ in range(STOCK)]
    recent: list[str] = []
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            r = rng.random()
            if recent and r < 0.04:
                text = rng.choice(recent)
            elif recent and r < 0.08:
                words = rng.choice(recent).split(" ")
                words[rng.randrange(len(words))] = "changed"
                text = " ".join(words)
            elif recent and r < 0.10:
                text = rng.choice(recent) + "\n\n" + paragraph()
            else:
                paragraphs = [paragraph() for _ in range(rng.randint(2, 4))]
                if rng.random() < 0.1:
                    paragraphs.insert(rng.randrange(len(paragraphs) + 1), rng.choice(stock))
                text = "\n\n".join(paragraphs)
                recent = (recent + [text])[-5000:]
            f.write(json.dumps({"text": text}) + "\n")
    return path.stat().st_size


CONFIG = """[run]
workdir = "run"
[data]
min_chars = 100
workers = {workers}
executor = "{executor}"
unit_mb = 4
sort_mb = 16
[[data.sources]]
name = "web"
domain = "web"
path = "corpus.jsonl"
"""


def _tree(root: int) -> list[int]:
    """root and every process under it, from /proc."""
    parent: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += parent.get(pid, [])
    return out


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _name(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    return ("spawned worker" if "multiprocessing.spawn" in cmd else "ray" if "ray" in cmd else cmd)[:60]


def run_prepare(workdir: Path) -> dict:
    log = open(workdir / "log.txt", "w")  # noqa: SIM115: the child writes it until proc.wait()
    proc = subprocess.Popen([sys.executable, "-m", "scratchlm", "data", "prepare", "--config", "c.toml"],
                            cwd=workdir, stdout=subprocess.DEVNULL, stderr=log,
                            env={**os.environ, "SCRATCHLM_PROGRESS": "0"})
    peaks: dict[int, tuple[str, float]] = {}
    total = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            now = 0.0
            for pid in _tree(proc.pid):
                rss = _rss_mib(pid)
                now += rss
                if rss > peaks.get(pid, ("", 0.0))[1]:
                    peaks[pid] = (peaks[pid][0] if pid in peaks else _name(pid), rss)
            total[0] = max(total[0], now)
            time.sleep(0.2)

    t0 = time.time()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.wait()
    sampler.join()
    log.close()
    wall = time.time() - t0
    if proc.returncode:
        raise SystemExit(f"data prepare failed in {workdir}: see {workdir / 'log.txt'}")
    stats = json.loads(next((workdir / "run" / "data").glob("*/stats.json")).read_text())
    others = [mib for pid, (_, mib) in peaks.items() if pid != proc.pid]
    return {"wall_s": wall, "main_peak_mib": peaks[proc.pid][1], "max_worker_peak_mib": max(others, default=0.0),
            "total_peak_mib": total[0], "processes": [{"pid": p, "what": w, "peak_mib": m} for p, (w, m) in
                                                       sorted(peaks.items())],
            "main_peak_by_step": stats["peak_mib"], "docs_kept": sum(s["docs_kept"] for s in stats["sources"].values()),
            "dedup": {k: stats["dedup"][k]["duplicates"] for k in ("exact", "fuzzy", "contained")},
            "paragraphs_cut": stats["dedup"].get("paragraph", {}).get("paragraphs", 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=25_000, help="documents at scale 1")
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bigbench"))
    ap.add_argument("--executor", default="local", choices=("local", "ray"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bigbench.json"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    pool = sentence_pool(args.work)
    results = []
    for scale in map(int, args.scales.split(",")):
        workdir = args.work / f"x{scale}"
        workdir.mkdir(exist_ok=True)
        size = generate(workdir / "corpus.jsonl", args.docs * scale, pool)
        (workdir / "c.toml").write_text(CONFIG.format(workers=args.workers, executor=args.executor))
        r = {"scale": scale, "docs": args.docs * scale, "mb": size / 1e6, **run_prepare(workdir)}
        r["docs_per_s"] = r["docs"] / r["wall_s"]
        r["workdir_mb"] = sum(f.stat().st_size for f in (workdir / "run").rglob("*") if f.is_file()) / 1e6
        results.append(r)
        print(f"x{scale}: {r['docs']:,} docs, {r['wall_s']:.0f} s, main {r['main_peak_mib']:.0f} MiB, "
              f"worker {r['max_worker_peak_mib']:.0f} MiB", flush=True)
    args.out.write_text(json.dumps({"sentences": len(pool), "executor": args.executor, "results": results}, indent=1))
    base = results[0]
    print("| scale | documents | MB | wall s | docs/s | main peak MiB | largest worker MiB | all processes MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['scale']}x | {r['docs']:,} | {r['mb']:.0f} | {r['wall_s']:.0f} | {r['docs_per_s']:.0f} | "
              f"{r['main_peak_mib']:.0f} ({r['main_peak_mib'] / base['main_peak_mib']:.2f}x) | "
              f"{r['max_worker_peak_mib']:.0f} | {r['total_peak_mib']:.0f} |")
    print("\nworkdir / input: " + ", ".join(f"{r['workdir_mb'] / r['mb']:.1f}x" for r in results))
    print("\nmain process: what each step added to its peak, MiB (stats.json peak_mib)")
    print("| step | " + " | ".join(f"{r['scale']}x" for r in results) + " |")
    print("|---|" + "---|" * len(results))
    growth = [_growth(r["main_peak_by_step"]) for r in results]
    for step in results[0]["main_peak_by_step"]:
        if any(g.get(step, 0) >= 1 for g in growth):
            print(f"| {step} | " + " | ".join(f"+{g.get(step, 0):.0f}" for g in growth) + " |")


def _growth(peaks: dict[str, float]) -> dict[str, float]:
    """How much each step raised the running peak (the first entry, "start", is the interpreter)."""
    values = list(peaks.values())
    return {step: now - before for step, before, now in zip(list(peaks)[1:], values, values[1:])}


if __name__ == "__main__":
    main()
