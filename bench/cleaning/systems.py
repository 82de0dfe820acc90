"""Run one system on the corpus and normalize its result into runs/<system>/decisions.jsonl.gz.

A decisions line: {"id", "source", "status": "kept"|"dropped", "rule" (dropped), "detail", "final" (kept: the
final text), "removed_lines": [[line, rule], ...]} where removed_lines are the input lines (stripped, whitespace
collapsed) of a kept document that are absent from its final text, with the rule that removed them.
runs/<system>/input.jsonl.gz holds the documents that system's reader produced (its own input).
A corpus (corpus or holdout_corpus, the module) gives the config (config_toml) and the before commit (BEFORE_COMMIT).
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import re
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from scratchlm.data.jsonl import read_jsonl  # plain or .zst; the same in the before and after trees

from . import corpus

REPO = Path(__file__).resolve().parents[2]
VENV_PY = REPO / ".venv" / "bin" / "python"
HERE = Path(__file__).resolve().parent
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def norm(line: str) -> str:
    return " ".join(line.split())


def read_gz(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def write_gz(path: Path, records) -> None:
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(path)


def scratchlm_env(system: str, root: Path, before_commit: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SCRATCHLM_PROGRESS="0", OMP_NUM_THREADS="1")
    if system == "before":
        src = root / f"before-src-{before_commit}"
        if not (src / "src" / "scratchlm").exists():
            src.mkdir(parents=True, exist_ok=True)
            archive = subprocess.run(["git", "-C", str(REPO), "archive", before_commit], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        env["PYTHONPATH"] = str(src / "src")
    else:
        env["PYTHONPATH"] = str(REPO / "src")
    return env


def check_import(env: dict, expect: Path) -> str:
    where = subprocess.run([str(VENV_PY), "-c", "import scratchlm; print(scratchlm.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(expect.resolve()):
        raise SystemExit(f"scratchlm imported from {where}, expected under {expect}")
    return where


def git_describe() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True,
                           text=True).stdout.strip()
    return head + (" + uncommitted changes under src/" if dirty else "")


def run_system(system: str, root: Path, bench: ModuleType = corpus) -> Path:
    run_dir = root / "runs" / system
    run_dir.mkdir(parents=True, exist_ok=True)
    if system == "datatrove":
        return run_datatrove(root, run_dir, bench)
    env = scratchlm_env(system, root, bench.BEFORE_COMMIT)
    where = check_import(env, Path(env["PYTHONPATH"]))
    cfg_path = run_dir / "scratchlm.toml"
    cfg_path.write_text(bench.config_toml(root, system))
    work = run_dir / "work"
    if work.exists():  # the step cache is keyed by data and settings, not code: a changed work tree must rerun
        shutil.rmtree(work)
    subprocess.run([str(VENV_PY), str(HERE / "read_worker.py"), str(cfg_path), str(run_dir / "input.jsonl.gz")],
                   env=env, check=True)
    t0 = time.time()
    log = run_dir / "prepare.log"
    with open(log, "w") as f:
        proc = subprocess.run([str(VENV_PY), "-m", "scratchlm", "data", "prepare", "-c", str(cfg_path)], env=env,
                              stdout=f, stderr=subprocess.STDOUT)
    seconds = time.time() - t0
    if proc.returncode:
        sys.stdout.write(log.read_text()[-3000:])
        raise SystemExit(f"scratchlm data prepare failed (exit {proc.returncode}), log: {log}")
    out = max((p.parent for p in (work / "data").glob("*/stats.json")), key=lambda p: p.stat().st_mtime)
    meta = {"system": system, "scratchlm": where, "code": bench.BEFORE_COMMIT if system == "before" else git_describe(),
            "prepare_seconds": round(seconds, 1), "output": str(out)}
    normalize_scratchlm(run_dir, out, meta)
    return run_dir


def run_datatrove(root: Path, run_dir: Path, bench: ModuleType) -> Path:
    venv = root / "dtvenv"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if subprocess.run([str(py), "-c", "import datatrove, spacy, nltk, regex"], capture_output=True).returncode:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "datatrove==0.10.1", "spacy", "nltk", "regex"],
                       check=True)
    before_input = root / "runs" / "before" / "input.jsonl.gz"
    if not before_input.exists():
        # the same documents the before run reads: scratchlm's readers at the before commit
        env = scratchlm_env("before", root, bench.BEFORE_COMMIT)
        cfg_path = run_dir / "scratchlm.toml"
        cfg_path.write_text(bench.config_toml(root, "before"))
        before_input = run_dir / "input.jsonl.gz"
        subprocess.run([str(VENV_PY), str(HERE / "read_worker.py"), str(cfg_path), str(before_input)], env=env,
                       check=True)
    if before_input != run_dir / "input.jsonl.gz":
        shutil.copyfile(before_input, run_dir / "input.jsonl.gz")
    t0 = time.time()
    subprocess.run([str(py), str(HERE / "dt_worker.py"), str(run_dir / "input.jsonl.gz"),
                    str(run_dir / "decisions.jsonl.gz")], check=True)
    version = subprocess.run([str(py), "-m", "pip", "show", "datatrove"], capture_output=True,
                             text=True).stdout.split("Version:")[1].split()[0]
    meta = {"system": "datatrove", "code": f"datatrove {version}", "seconds": round(time.time() - t0, 1),
            "filters": "GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter, FineWebQualityFilter "
                       "(defaults, in that order); no LanguageFilter (downloads a model)"}
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    return run_dir


def _paragraph_rules(text: str, para_recs: list[tuple[str, str]]) -> dict[str, str]:
    """line -> rule for every line of an input paragraph that holds the start of a cut paragraph's excerpt (the
    excerpt is the first 160 characters only; earlier steps may have cut the paragraph's first lines)."""
    out: dict[str, str] = {}
    for para in _PARAGRAPH_BREAK.split(text):
        plines = [norm(x) for x in para.split("\n") if x.strip()]
        joined = " ".join(plines)
        for ex, rule in para_recs:
            if ex and ex[:80] in joined:
                for ln in plines:
                    out.setdefault(ln, rule)
                break
    return out


def _attribute(lines: list[str], removed_idx: list[int], records: list[dict], text: str) -> dict[int, str]:
    """Which ledger record (line or paragraph level) removed each missing input line."""
    line_recs = [(norm(r["excerpt"]), r["rule"]) for r in records if r.get("level") == "line"]
    para_recs = [(norm(r["excerpt"]), r["rule"]) for r in records if r.get("level") != "line"]
    in_cut_paragraph = _paragraph_rules(text, para_recs) if para_recs else {}
    out: dict[int, str] = {}
    for i in removed_idx:
        ln = lines[i]
        rule = next((rule for ex, rule in line_recs if ex and (ln.startswith(ex) or ex.startswith(ln))), None)
        if rule is None:
            # the line opens a cut paragraph, or lies inside its first 160 characters
            rule = next((rule for ex, rule in para_recs if ex and (ex.startswith(ln) or ln.startswith(ex)
                                                                  or (len(ln) >= 20 and ln in ex))), None)
        if rule is None:
            rule = in_cut_paragraph.get(ln)
        if rule is None and i - 1 in out and out[i - 1] in {r for _, r in para_recs}:
            rule = out[i - 1]  # a later line of the same cut paragraph
        if rule is None:
            rules = {r["rule"] for r in records}
            rule = rules.pop() if len(rules) == 1 else "unattributed"
        out[i] = rule
    return out


def removed_lines(input_text: str, final_text: str, records: list[dict]) -> list[list[str]]:
    lines = [norm(x) for x in input_text.split("\n") if x.strip()]
    final = {norm(x) for x in final_text.split("\n") if x.strip()}
    idx = [i for i, ln in enumerate(lines) if ln not in final]
    rules = _attribute(lines, idx, records, input_text)
    seen, out = set(), []
    for i in idx:
        if lines[i] not in seen:
            seen.add(lines[i])
            out.append([lines[i], rules[i]])
    return out


def normalize_scratchlm(run_dir: Path, out: Path, meta: dict) -> None:
    final: dict[str, str] = {}
    for p in sorted((out / "train").glob("*.jsonl*")) + sorted((out / "val").glob("*.jsonl*")):
        for doc in read_jsonl(p):
            final[doc["id"]] = doc["text"]
    doc_rec: dict[str, dict] = {}
    piece_recs: dict[str, list[dict]] = defaultdict(list)
    for p in sorted(out.glob("rejected-*.jsonl*")):
        for r in read_jsonl(p):
            if r.get("level", "document") == "document":
                doc_rec[r["id"]] = r
            else:
                piece_recs[r["id"]].append(r)

    def records():
        for rec in read_gz(run_dir / "input.jsonl.gz"):
            d = {"id": rec["id"], "source": rec["source"]}
            if rec["text"] is None:
                d.update(status="dropped", rule=rec.get("read_error", "read"), removed_lines=[])
            elif rec["id"] in final:
                d.update(status="kept", final=final[rec["id"]],
                         removed_lines=removed_lines(rec["text"], final[rec["id"]], piece_recs.get(rec["id"], [])))
            else:
                r = doc_rec.get(rec["id"])
                d.update(status="dropped", rule=r["rule"] if r else "unattributed",
                         detail=(r or {}).get("detail", ""), removed_lines=[])
            yield d

    write_gz(run_dir / "decisions.jsonl.gz", records())
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.copyfile(out / "stats.json", run_dir / "stats.json")
