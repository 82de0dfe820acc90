"""The validation draw's near-copy scan (data/val_guard.near_copies) over 1 and 2 processes, side by side, on growing
prefixes of a corpus: wall and CPU seconds (this process and the pool's workers), to place GUARD_PARALLEL_CHARS
(data/split_step.py). The corpus is a directory (every file a training document) or a JSONL file of {"id", "text"};
every 50th document is also a candidate (so each has a copy: itself).

    PYTHONPATH=src python bench/guard_scan_speed.py /work/bench-cleaning/corpus
    PYTHONPATH=src python bench/guard_scan_speed.py /work/bench-near-copies/corpus.jsonl --mb 2,4,8,16,32
"""
import argparse
import glob
import json
import resource
import time

from scratchlm.data.val_guard import CHUNK_CHARS, near_copies


def cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def read(root: str) -> list[dict]:
    if root.endswith(".jsonl"):
        return [json.loads(line) for line in open(root)]
    docs = []
    for p in sorted(glob.glob(f"{root}/**/*", recursive=True)):
        try:
            docs.append({"id": p, "text": open(p, errors="replace").read()})
        except (IsADirectoryError, UnicodeDecodeError):
            pass
    return docs


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/work/bench-cleaning/corpus")
    ap.add_argument("--mb", default="", help="prefix sizes in MB, comma-separated (default: the whole corpus)")
    args = ap.parse_args()
    docs = read(args.corpus)
    cands = {d["id"] + "#v": d["text"] for d in docs[::50]}
    near_copies(dict(list(cands.items())[:2]), docs[:10], 13, 8, 0.5)  # compiles the word pattern once
    for mb in [float(m) for m in args.mb.split(",")] if args.mb else [float("inf")]:
        prefix, chars = [], 0
        for d in docs:
            if chars >= mb * 1e6:
                break
            prefix.append(d)
            chars += len(d["text"])
        for w in (1, 2, 1, 2):
            c0, t0 = cpu_seconds(), time.perf_counter()
            f = near_copies(cands, prefix, 13, 8, 0.5, workers=w)
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            print(f"workers {w}: {len(prefix)} docs {chars / 1e6:.1f} MB ({-(-chars // CHUNK_CHARS)} chunks) in "
                  f"{wall:.2f} s = {chars / 1e6 / wall:.1f} MB/s, {cpu:.2f} CPU s; "
                  f"{len(f)} candidates with a copy", flush=True)
