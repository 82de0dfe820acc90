"""Does the data stage still produce the same outputs? `scratchlm data prepare` on one config with an older
revision's code and with the work tree's, each in a fresh workdir, then every output compared: the train and
validation documents, the ledger, and stats.json and the manifest without their timings and cache paths.

    python bench/same_outputs.py --rev 8e77964 --config /tmp/cmp/cfg.toml --work /tmp/same
    python bench/same_outputs.py --rev 8e77964 --quickstart --work /tmp/same-qs   # the quickstart's corpus
    python bench/same_outputs.py --rev 8e77964 --slice 4 --work /tmp/same-slice   # real text, see below

--slice N: every Nth document of bench/near_copies.py's corpus (/work/bench-near-copies/corpus.jsonl: Debian
Reference and Handbook, man pages, stdlib), one source per origin, every language kept, 2 workers.

The config's `run.workdir` is replaced by <work>/<side>; its sources' paths are made absolute first. Prints
one line per side (CPU seconds of the prepare and everything it started, the cache's bytes) and the files that
differ; exits 1 if any does.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))
sys.path.insert(0, str(BENCH))

from old_revision import src_at  # noqa: E402
from scratchlm.data.jsonl import read_lines  # noqa: E402
from scratchlm.toml_text import toml_value  # noqa: E402

VOLATILE = ("seconds", "peak_mib", "created", "units", "steps")  # timings, dates, cache paths
# the manifest's size and hash of each file: stats.json's change with its timings; every other file is compared
FILE_FACTS = ("bytes", "xxh3")


def side_config(config: Path, workdir: Path) -> Path:
    """The config with its workdir replaced and its sources' paths absolute, written beside the workdir."""
    raw = tomllib.loads(config.read_text())
    raw.setdefault("run", {})["workdir"] = str(workdir)
    for source in raw.get("data", {}).get("sources", []):
        source["path"] = str((config.parent / source["path"]).resolve())
    lines = []
    for section, table in raw.items():  # every top-level key of a scratchlm config is a table
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items() if not _tables(v)]
        for key, tables in ((k, v) for k, v in table.items() if _tables(v)):
            for entry in tables:
                lines += ["", f"[[{section}.{key}]]"] + [f"{k} = {toml_value(v)}" for k, v in entry.items()]
        lines.append("")
    path = workdir.parent / f"{workdir.name}.toml"
    path.write_text("\n".join(lines))
    return path


def _tables(value) -> bool:
    """An array of tables (`[[data.sources]]`), written as one."""
    return isinstance(value, list) and bool(value) and all(isinstance(x, dict) for x in value)


def prepare(src: Path, config: Path, workdir: Path) -> float:
    """CPU seconds of `data prepare` and every process it waited for."""
    shutil.rmtree(workdir, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "scratchlm", "data", "prepare", "-c", str(config)], check=True,
                   env={**os.environ, "PYTHONPATH": str(src), "SCRATCHLM_PROGRESS": "0"},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE + FILE_FACTS}
    return value


def digests(data: Path) -> dict[str, str]:
    """Every output file of a prepared data directory, as a digest of its lines (JSON ones without VOLATILE)."""
    out = {}
    for path in sorted(data.rglob("*")):
        if not path.is_file() or "cache" in path.relative_to(data).parts:
            continue
        parts = path.relative_to(data).parts  # <data stage ID>/train/..., the ID's folder left out
        name = "/".join(parts[1:]) or parts[0]
        if path.suffix == ".json":
            text = json.dumps(_stable(json.loads(path.read_text())), sort_keys=True)
        elif path.name.endswith((".jsonl", ".zst")):
            text = "".join(read_lines(path))
        else:
            text = path.read_bytes().hex()
        out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


SLICE_SOURCES = {"debian-handbook": ("handbook", "docs"), "debian-reference": ("reference", "docs"),
                 "manpages": ("man", "man"), "stdlib": ("stdlib", "code")}  # origin -> (source, domain)


def slice_config(every: int, work: Path) -> Path:
    """A config over every `every`th document of near_copies.py's corpus, a source per origin."""
    files = {origin: open(work / f"{name}.jsonl", "w", encoding="utf-8") for origin, (name, _) in SLICE_SOURCES.items()}
    with open("/work/bench-near-copies/corpus.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % every == 0:
                doc = json.loads(line)
                files[doc["source"]].write(json.dumps({"id": doc["id"], "text": doc["text"]}, ensure_ascii=False)
                                           + "\n")
    for f in files.values():
        f.close()
    config = work / "slice.toml"
    config.write_text("[data]\nworkers = 2\nlanguages = []\n\n" + "".join(
        f'[[data.sources]]\nname = "{name}"\ndomain = "{domain}"\npath = "{name}.jsonl"\n\n'
        for name, domain in SLICE_SOURCES.values()))
    return config


def cache_bytes(workdir: Path) -> int:
    return sum(p.stat().st_size for p in (workdir / "data" / "cache").rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", required=True, help="the older revision")
    ap.add_argument("--config", type=Path, help="a config with [[data.sources]]")
    ap.add_argument("--quickstart", action="store_true", help="the quickstart's built-in corpus instead")
    ap.add_argument("--slice", type=int, help="every Nth document of bench/near_copies.py's corpus instead")
    ap.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    config = args.config
    if args.quickstart:
        from scratchlm.data.builtin import build_builtin_corpus

        corpus = build_builtin_corpus(args.work / "corpus")
        config = args.work / "quickstart.toml"
        config.write_text("".join(f'[[data.sources]]\nname = "{d}"\ndomain = "{d}"\npath = "{p}"\n\n'
                                  for d, p in corpus.items()))
    if args.slice:
        config = slice_config(args.slice, args.work)
    sides = {"old": src_at(args.rev, args.work)[0], "new": BENCH.parent / "src"}
    found = {}
    for side, src in sides.items():
        workdir = args.work / side
        cpu = prepare(src, side_config(config.resolve(), workdir), workdir)
        found[side] = digests(workdir / "data")
        print(f"{side} ({src}): {cpu:.1f} CPU s, cache {cache_bytes(workdir) / 1e6:.1f} MB, "
              f"{len(found[side])} output files")
    differ = sorted(k for k in found["old"].keys() | found["new"].keys()
                    if found["old"].get(k) != found["new"].get(k))
    print("identical" if not differ else f"DIFFERENT: {differ}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
