"""The validation draw's near-copy scan (data/val_guard.near_copies) over 1 and 2 processes, side by side: every file of
a corpus directory is a training document, every 250th is also a candidate (so each has a copy: itself)."""
import glob
import sys
import time

from scratchlm.data.val_guard import near_copies

if __name__ == "__main__":
    docs = []
    root = sys.argv[1] if len(sys.argv) > 1 else "/work/bench-cleaning/corpus"
    for p in sorted(glob.glob(f"{root}/**/*", recursive=True)):
        try: docs.append({"id": p, "text": open(p, errors="replace").read()})
        except (IsADirectoryError, UnicodeDecodeError): pass
    mb = sum(len(d["text"]) for d in docs) / 1e6
    cands = {d["id"] + "#v": d["text"] for d in docs[::250]}
    for w in (1, 2, 1, 2):
        t0 = time.perf_counter(); f = near_copies(cands, docs, 13, 8, 0.5, workers=w); dt = time.perf_counter() - t0
        print(f"workers {w}: {len(docs)} docs {mb:.1f} MB in {dt:.1f} s = {mb/dt:.1f} MB/s, {len(f)} of {len(cands)} candidates with a copy")
