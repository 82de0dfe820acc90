"""Tokenization throughput and memory: our process-pool encoder against one process calling encode_batch.

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/tokenize_bench.py [--repeats 3] [--scale 10]

Text: the quickstart's built-in corpus (stdlib code capped at 4 MB, pydoc topics, package descriptions),
tokenized with a 4096-token BPE trained on it (the quickstart's vocabulary). Every variant produces the same
thing, one flat id array per batch/chunk with each document between bos and eos, and the outputs are checked equal.

- `encode_batch, rayon`: one process, Tokenizer.encode_batch with TOKENIZERS_PARALLELISM=true, i.e. rayon
  threads over all cores (the library's own parallelism; the fair baseline on a multi-core machine);
- `encode_batch, 1 thread`: the same with TOKENIZERS_PARALLELISM=false;
- `encode_batch_fast, ...`: the same two with encode_batch_fast (no character offsets), which our workers call:
  it separates what the faster call gives from what the processes give;
- `ours, N workers`: scratchlm.tokenizer.parallel.ParallelEncoder with N spawned single-threaded workers.
  The pool's start-up (spawn + import + tokenizer load) is timed separately and not in tokens/s.

Memory: the full shards path (read .jsonl.zst, encode, write .bin) on the corpus x1 and x`--scale`, each in a
fresh process; a thread samples the resident memory (VmRSS) of the main process plus all workers every 0.2 s.
(getrusage's ru_maxrss is useless here: Linux carries it across fork+exec from the parent.)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from scratchlm.data.builtin import build_builtin_corpus
from scratchlm.data.jsonl import ShardWriter, read_jsonl
from scratchlm.quickstart import CODE_CHARS
from scratchlm.tokenizer.bpe import document_wrap_ids, load_tokenizer, save_tokenizer, train_bpe
from scratchlm.executor import LocalExecutor
from scratchlm.tokenizer.parallel import ParallelEncoder, chunked
from scratchlm.tokenizer.shards import SourceShardWriter, dtype_for_vocab
from scratchlm.tokenizer.stage import encode_stream

BATCH = 512


def baseline(tok, texts: list[str], wrap: tuple[int, int], dtype, fast: bool) -> list[np.ndarray]:
    encode_batch = tok.encode_batch_fast if fast else tok.encode_batch
    out = []
    for i in range(0, len(texts), BATCH):
        encoded = encode_batch(texts[i:i + BATCH], add_special_tokens=False)
        out.append(np.concatenate([np.asarray([wrap[0], *e.ids, wrap[1]], dtype=dtype) for e in encoded]))
    return out


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(encoder: ParallelEncoder | None) -> float:
    pids = [os.getpid()] + (list(encoder.executor._pool._processes) if encoder and encoder.executor._pool else [])
    return sum(cpu_seconds(p) for p in pids)


def throughput(tok_path: Path, texts: list[str], repeats: int) -> dict:
    tok = load_tokenizer(tok_path)
    wrap, dtype = document_wrap_ids(tok), dtype_for_vocab(tok.get_vocab_size())
    reference = None
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # CPU seconds of every process involved: shows how the work divides
    startup: dict[str, float] = {}
    encoders = {}
    for workers in (1, 2):
        enc, startup[f"ours, {workers} workers"] = timed(
            lambda: _warm(ParallelEncoder(tok_path, dtype, wrap, executor=LocalExecutor(workers, inline=False))))
        encoders[f"ours, {workers} workers"] = enc
    for _ in range(repeats):  # interleaved, so a noisy neighbour hurts every variant alike
        for fast, mode in ((False, "true"), (False, "false"), (True, "true"), (True, "false")):
            os.environ["TOKENIZERS_PARALLELISM"] = mode
            name = f"encode_batch{'_fast' if fast else ''}, {'rayon' if mode == 'true' else '1 thread'}"
            c0 = cpu_of(None)
            out, dt = timed(lambda: baseline(tok, texts, wrap, dtype, fast))
            times.setdefault(name, []).append(dt)
            cpu.setdefault(name, []).append(cpu_of(None) - c0)
            flat = np.concatenate(out)
            reference = flat if reference is None else reference
            assert np.array_equal(flat, reference)
        for name, enc in encoders.items():
            c0 = cpu_of(enc)
            out, dt = timed(lambda: [t for t, _ in enc.encode(chunked(texts))])
            times.setdefault(name, []).append(dt)
            cpu.setdefault(name, []).append(cpu_of(enc) - c0)
            assert np.array_equal(np.concatenate(out), reference), name
    for enc in encoders.values():
        enc.close()
    n_tokens = len(reference)
    return {"tokens": n_tokens, "chars": sum(map(len, texts)), "docs": len(texts), "startup_s": startup,
            "tokens_per_s": {k: {"median": n_tokens / statistics.median(v), "best": n_tokens / min(v),
                                 "cpu_s_median": statistics.median(cpu[k]), "wall_s_median": statistics.median(v)}
                             for k, v in times.items()}}


def _warm(enc: ParallelEncoder) -> ParallelEncoder:
    list(enc.encode([["warm up"]] * (2 * enc.workers)))  # every worker has spawned and loaded the tokenizer
    return enc


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:  # the process just ended
        pass
    return 0.0


class RssSampler(threading.Thread):
    """Total resident memory of this process and its live children, sampled until stopped."""

    def __init__(self, period: float = 0.2):
        super().__init__(daemon=True)
        self.period, self.samples, self.halt = period, [], threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.halt.is_set():
            children = Path(f"/proc/{me}/task/{me}/children").read_text().split()
            self.samples.append(_rss_mib(me) + sum(_rss_mib(int(c)) for c in children))
            self.halt.wait(self.period)


def rss_child(corpus: Path, tok_path: Path, workers: int) -> None:
    """Run in a fresh process: the real shards path over `corpus`; print memory and speed as JSON."""
    tok = load_tokenizer(tok_path)
    out = Path(tempfile.mkdtemp(prefix="tokbench-"))
    sampler = RssSampler()
    sampler.start()
    t0 = time.perf_counter()
    with ParallelEncoder(tok_path, dtype_for_vocab(tok.get_vocab_size()), document_wrap_ids(tok), workers) as enc:
        writer = SourceShardWriter(out, "bench", tok.get_vocab_size(), shard_tokens=1 << 22)
        tally = encode_stream(enc, writer, (d for f in sorted(corpus.glob("*.jsonl.zst")) for d in read_jsonl(f)),
                              0, "bench", np.zeros(tok.get_vocab_size(), dtype=np.int64))
    seconds = time.perf_counter() - t0
    sampler.halt.set()
    sampler.join()
    rss = sampler.samples
    quarter = len(rss) // 4
    print(json.dumps({"tokens": tally["tokens"], "chars": tally["chars"], "files": len(tally["files"]),
                      "seconds": seconds, "tokens_per_s": tally["tokens"] / seconds, "workers": workers,
                      "peak_total_rss_mib": max(rss),
                      "peak_total_rss_mib_first_quarter": max(rss[:max(quarter, 1)]),
                      "peak_total_rss_mib_last_quarter": max(rss[-max(quarter, 1):])}))
    for f in out.iterdir():
        f.unlink()
    out.rmdir()


def write_scaled(docs: list[dict], scale: int, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with ShardWriter(directory, "corpus", per_shard=50_000) as w:
        for copy in range(scale):
            for d in docs:
                w.write({**d, "id": f"{d['id']}#{copy}"})
    return directory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--rss-child", nargs=2, metavar=("CORPUS", "TOKENIZER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        rss_child(Path(args.rss_child[0]), Path(args.rss_child[1]), workers=2)
        return
    work = Path(args.workdir or tempfile.mkdtemp(prefix="tokbench-"))
    files = build_builtin_corpus(work / "corpus", code_max_chars=CODE_CHARS)
    docs = [d for f in files.values() for d in read_jsonl(f)]
    texts = [d["text"] for d in docs]
    tok_path = work / "tok" / "tokenizer.json"
    if not tok_path.exists():
        tok_path.parent.mkdir(exist_ok=True)
        save_tokenizer(train_bpe(texts, vocab_size=4096), tok_path.parent)
    print(f"corpus: {len(texts):,} documents, {sum(map(len, texts)):,} chars; {os.cpu_count()} cores",
          file=sys.stderr)
    load_before = os.getloadavg()[0]
    result = {"throughput": throughput(tok_path, texts, args.repeats), "memory": {}}
    result["load_average_1min"] = [load_before, os.getloadavg()[0]]  # other jobs on the machine, before/after
    for scale in (1, args.scale):
        corpus = write_scaled(docs, scale, work / f"scaled-{scale}")
        child = subprocess.run([sys.executable, __file__, "--rss-child", str(corpus), str(tok_path)],
                               capture_output=True, text=True, check=True, env={**os.environ})
        result["memory"][f"x{scale}"] = json.loads(child.stdout.strip().splitlines()[-1])
    print(json.dumps(result, indent=2))
    base = result["throughput"]["tokens_per_s"]
    print(f"\nload average (1 min) before/after the throughput runs: {result['load_average_1min']}")
    print("\n| variant | tokens/s (median) | best | vs encode_batch rayon (median) | wall s | CPU s, all processes |"
          "\n|---|---|---|---|---|---|")
    ref = base["encode_batch, rayon"]["median"]
    for name, v in base.items():
        print(f"| {name} | {v['median']:,.0f} | {v['best']:,.0f} | {v['median'] / ref:.2f}x | "
              f"{v['wall_s_median']:.2f} | {v['cpu_s_median']:.2f} |")
    print("\n| corpus | chars | tokens | shard files | seconds | peak RSS MiB, main + workers | peak in first / "
          "last quarter |\n|---|---|---|---|---|---|---|")
    for name, m in result["memory"].items():
        print(f"| {name} | {m['chars']:,} | {m['tokens']:,} | {m['files']} | {m['seconds']:.1f} | "
              f"{m['peak_total_rss_mib']:.0f} | {m['peak_total_rss_mib_first_quarter']:.0f} / "
              f"{m['peak_total_rss_mib_last_quarter']:.0f} |")


if __name__ == "__main__":
    main()
