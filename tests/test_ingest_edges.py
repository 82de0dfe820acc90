"""Damaged, oddly encoded and hostile input, and the failures around it: nothing is lost silently, a mistake is
one line naming the file, and a killed run leaves no processes or temp directories behind."""
import codecs
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard

from scratchlm.config import config_from_dict
from scratchlm.data.jsonl import read_jsonl
from scratchlm.data.prepare import prepare_data
from scratchlm.stages import size_estimate
from scratchlm.data.readers import Rejected, read_file
from scratchlm.errors import UserError
from scratchlm.executor import LocalExecutor

# One-line template documents: the content filters would rightly drop them all (as in test_prepare.py).
CONTENT_STEPS = ["boilerplate", "repeated_lines", "language", "quality", "promo", "fuzzy_dedup", "paragraph_dedup"]


def _lines(n: int, words: int = 8) -> bytes:
    return "".join(json.dumps({"text": f"document number {i} " + "word " * words}) + "\n" for i in range(n)).encode()


def _config(base: Path, sources: dict[str, str], **data):
    cfg = config_from_dict({"data": {"sources": [{"name": n, "domain": "web", "path": p} for n, p in sources.items()],
                                     "min_chars": 10, "workers": 1, "skip": CONTENT_STEPS, **data}})
    cfg.path = base / "c.toml"
    return cfg


def _prepare(cfg, out: Path | None = None) -> tuple[Path, dict]:
    out = out or cfg.base_dir / "out"
    out.mkdir(exist_ok=True)
    return out, prepare_data(cfg, out, size_estimate(cfg))


def _kept_texts(out: Path) -> list[str]:
    docs = [d for f in (out / "train").glob("*.zst") for d in read_jsonl(f)]
    docs += list(read_jsonl(out / "val" / "web.jsonl")) if (out / "val" / "web.jsonl").exists() else []
    return [d["text"] for d in docs]


def _ledger(out: Path) -> list[dict]:
    return [r for f in out.glob("rejected-*.jsonl.zst") for r in read_jsonl(f)]


def _read(path: Path, fmt: str = "text", **kw) -> tuple[list[dict], list[Rejected]]:
    items = list(read_file(path, f"s/{path.name}", fmt, "text", **kw))
    return [i for i in items if isinstance(i, dict)], [i for i in items if isinstance(i, Rejected)]


# 1. Damaged files -------------------------------------------------------------------------------------------------

def test_a_cut_zst_file_keeps_what_came_before_and_records_where_it_ends(tmp_path):
    data = zstandard.ZstdCompressor().compress(_lines(3000, 40))  # a few zstd blocks
    for share in (0.5, 0.9):
        path = tmp_path / f"cut{share}.jsonl.zst"
        path.write_bytes(data[:int(len(data) * share)])
        docs, rejected = _read(path, "jsonl")
        assert docs and [r.rule for r in rejected] == ["truncated"]
        assert rejected[0].id == f"s/{path.name}:{len(docs) + 1}"
        assert f"at byte {path.stat().st_size}" in rejected[0].detail
        assert f"the {len(docs)} lines before it are kept" in rejected[0].detail


def test_a_small_cut_zst_file_is_recorded_not_read_as_empty(tmp_path):
    data = zstandard.ZstdCompressor().compress(_lines(300))  # one zstd block: half of it decodes to nothing
    (tmp_path / "half.jsonl.zst").write_bytes(data[:len(data) // 2])
    docs, rejected = _read(tmp_path / "half.jsonl.zst", "jsonl")
    assert docs == [] and [r.rule for r in rejected] == ["truncated"]


def test_every_frame_of_a_concatenated_zst_file_is_read(tmp_path):
    one = zstandard.ZstdCompressor().compress(_lines(50))
    (tmp_path / "two.jsonl.zst").write_bytes(one + one)
    docs, rejected = _read(tmp_path / "two.jsonl.zst", "jsonl")
    assert len(docs) == 100 and not rejected


def test_prepare_records_and_warns_about_a_damaged_file(tmp_path):
    (tmp_path / "good.jsonl").write_bytes(_lines(30))
    data = zstandard.ZstdCompressor().compress(_lines(3000, 40))  # a few zstd blocks
    (tmp_path / "cut.jsonl.zst").write_bytes(data[:int(len(data) * 0.9)])
    out, stats = _prepare(_config(tmp_path, {"good": "good.jsonl", "cut": "cut.jsonl.zst"}))
    src = stats["sources"]["cut"]
    assert src["dropped"]["truncated"] == 1 and src["docs_kept"] > 1000
    (record,) = [r for r in _ledger(out) if r["rule"] == "truncated"]
    assert record["id"].startswith("cut/cut.jsonl.zst:") and "byte" in record["detail"]
    assert any("source `cut`: 1 damaged file(s) (truncated 1)" in w for w in stats["warnings"])


def test_a_source_that_yields_no_document_from_its_file_is_an_error_naming_it(tmp_path):
    data = zstandard.ZstdCompressor().compress(_lines(300))
    (tmp_path / "half.jsonl.zst").write_bytes(data[:len(data) // 2])
    with pytest.raises(UserError, match=r"source `s`.*truncated.*s/half\.jsonl\.zst:1: half\.jsonl\.zst: the file "
                                        r"ends inside a zstd frame at byte \d+"):
        _prepare(_config(tmp_path, {"s": "half.jsonl.zst"}))
    (tmp_path / "blank.jsonl").write_bytes(b"\n  \n\n")
    with pytest.raises(UserError, match=r"source `b`.*empty_file.*b/blank\.jsonl: 5 bytes but no document"):
        _prepare(_config(tmp_path, {"b": "blank.jsonl"}))


def test_a_source_whose_documents_were_all_rejected_by_rules_is_no_error(tmp_path):
    (tmp_path / "short.jsonl").write_bytes(b'{"text": "tiny"}\n{"text": "small"}\n')
    (tmp_path / "good.jsonl").write_bytes(_lines(30))
    _, stats = _prepare(_config(tmp_path, {"short": "short.jsonl", "good": "good.jsonl"}))
    assert stats["sources"]["short"]["dropped"] == {"too_short": 2}


def test_nul_characters_are_stripped_counted_and_never_reach_the_shards(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text(json.dumps({"text": "a document with a NUL\u0000 inside it"}) + "\n")
    (tmp_path / "d" / "late.txt").write_bytes(b"plain text " * 1000 + b"\x00\x00 and more text")  # NULs past 8 KiB
    out, stats = _prepare(_config(tmp_path, {"s": "d"}))
    texts = _kept_texts(out)
    assert len(texts) == 2 and not any("\x00" in t for t in texts)
    notes = stats["sources"]["s"]["steps"]["read"]["notes"]
    assert notes["repaired_docs"] == {"nul_stripped": 2} and notes["repaired_chars"] == {"nul_stripped": 3}


@pytest.mark.parametrize("name,raw,encoding", [
    ("le.txt", "Grüße aus Köln, a text in UTF-16".encode("utf-16"), "utf-16-le"),
    ("be.txt", codecs.BOM_UTF16_BE + "Grüße aus Köln, a text in UTF-16".encode("utf-16-be"), "utf-16-be"),
    ("wide.txt", "Grüße aus Köln, a text in UTF-32".encode("utf-32"), "utf-32-le"),
    ("nobom.txt", "Grüße aus Köln, a text in UTF-16 without a mark".encode("utf-16-le"), "utf-16-le"),
    ("sig.txt", "Grüße aus Köln".encode("utf-8-sig"), None),
])
def test_utf16_and_utf32_text_is_decoded_and_its_encoding_noted(tmp_path, name, raw, encoding):
    (tmp_path / name).write_bytes(raw)
    (doc,), rejected = _read(tmp_path / name)
    assert not rejected and doc["text"].startswith("Grüße aus Köln")
    assert doc.get("_read_notes", {}).get("encoding") == encoding


def test_a_utf16_jsonl_file_is_read_line_by_line(tmp_path):
    (tmp_path / "ps.jsonl").write_bytes(_lines(5).decode().encode("utf-16"))  # what PowerShell's `>` writes
    docs, rejected = _read(tmp_path / "ps.jsonl", "jsonl")
    assert len(docs) == 5 and not rejected and docs[0]["_read_notes"] == {"encoding": "utf-16-le"}


def test_a_utf8_byte_order_mark_is_not_taken_for_part_of_the_first_json_line(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(codecs.BOM_UTF8 + _lines(3))
    docs, rejected = _read(tmp_path / "bom.jsonl", "jsonl")
    assert len(docs) == 3 and not rejected


def test_legacy_encodings_are_rejected_with_the_likely_encoding_named(tmp_path):
    (tmp_path / "fr.txt").write_bytes("Le café est très chaud à midi.".encode("latin-1"))
    (tmp_path / "mixed.txt").write_bytes("“quoted” café ".encode() * 5 + "é".encode("latin-1"))
    (tmp_path / "bin.txt").write_bytes(bytes(range(256)) * 4)
    assert [(r.rule, "latin-1/cp1252" in r.detail) for r in _read(tmp_path / "fr.txt")[1]] == [("not_utf8", True)]
    assert "mixed encodings" in _read(tmp_path / "mixed.txt")[1][0].detail
    assert [r.rule for r in _read(tmp_path / "bin.txt")[1]] == ["binary"]


# 2. Tracebacks on bad input ---------------------------------------------------------------------------------------

def test_a_lone_surrogate_is_replaced_and_counted_not_a_crash(tmp_path):
    (tmp_path / "s.jsonl").write_text('{"text": "broken pair \\ud800 in a document", "title": "t\\udfff"}\n'
                                      + _lines(3).decode())
    out, stats = _prepare(_config(tmp_path, {"s": "s.jsonl"}))
    assert any("broken pair \ufffd in a document" == t for t in _kept_texts(out))
    assert stats["sources"]["s"]["steps"]["read"]["notes"]["repaired_chars"] == {"lone_surrogate": 2}


def test_a_file_that_vanished_after_listing_is_one_line_naming_it(tmp_path, monkeypatch):
    from scratchlm.data import units
    from scratchlm.ids import DigestCache

    with pytest.raises(UserError, match=r"gone\.txt: listed as an input but no longer exists"):
        DigestCache(tmp_path / "d.json").digest(tmp_path / "gone.txt")
    (tmp_path / "here.txt").write_text("a document that is still here")
    listing = units.SourceListing([tmp_path / "here.txt", tmp_path / "gone.txt"], tmp_path)
    monkeypatch.setattr(units, "list_source", lambda src, base, workdir: listing)
    with pytest.raises(UserError, match=r"gone\.txt: listed as an input but no longer exists"):
        units.plan_units(_config(tmp_path, {"s": "here.txt"}), DigestCache(tmp_path / "d.json"))


def test_a_source_name_with_a_slash_never_becomes_a_path(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(_lines(30))
    cfg = _config(tmp_path, {"s": "in.jsonl"}, skip=["boilerplate", "language", "quality", "promo"])
    cfg.data.sources[0].name = "../team/web"  # past the config check, as the cache must not trust it either
    out, stats = _prepare(cfg)
    work = cfg.workdir / "data" / "cache"
    assert not (tmp_path / "team").exists() and not (work.parent / "team").exists()
    assert all(len(p.relative_to(work).parts) <= 3 for p in work.rglob("*"))  # <step>/<key>/<file>, nothing deeper
    assert all("/" not in name for name in stats["train_files"]["../team/web"])
    assert stats["sources"]["../team/web"]["docs_in"] == 30  # (the template lines are then cut as page chrome)


# 3. Disk full and temp directories --------------------------------------------------------------------------------

def test_disk_full_in_a_step_is_one_line_and_leaves_no_temp_directory(tmp_path, monkeypatch):
    from scratchlm.data.jsonl import ShardWriter

    def full(self, doc):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "in.jsonl").write_bytes(_lines(30))
    cfg = _config(tmp_path, {"s": "in.jsonl"})
    monkeypatch.setattr(ShardWriter, "write", full)
    with pytest.raises(UserError, match=r"disk full while writing .*data/cache/read/\..*\.tmp\d+: .* free on that "
                                        r"filesystem, about [\d.,]+ MiB needed \(the size of its input\)"):
        _prepare(cfg)
    assert not [p for p in (cfg.workdir / "data" / "cache").rglob("*") if ".tmp" in p.name]


def test_a_new_run_removes_the_temp_directories_a_killed_run_left(tmp_path):
    from scratchlm.data.step_runner import StepRunner

    cache = tmp_path / "cache"
    dead = cache / "read" / ".0123abcd.tmp999999999"  # beyond any pid_max: its process is gone
    dead_npy = cache / "repeated_lines" / ".s-0123.npy.tmp999999999.npy"
    live = cache / "read" / f".4567cdef.tmp{os.getppid()}"  # another run still at work
    finished = cache / "read" / "0123abcd"
    for d in (dead / "sub", live, finished, dead_npy.parent):
        d.mkdir(parents=True)
    dead_npy.write_bytes(b"")
    (finished / "stats.json").write_text("{}")
    StepRunner([], cache, LocalExecutor(1))
    assert not dead.exists() and not dead_npy.exists() and live.exists() and (finished / "stats.json").exists()


# 4. Orphans -------------------------------------------------------------------------------------------------------

ORPHAN_SCRIPT = '''
import json, os, sys, threading, time
from multiprocessing import resource_tracker
from pathlib import Path


def hang(doc, ctx):
    time.sleep(3600)


def report(pool_of):
    while (pool := pool_of()) is None or len(pool._processes) < 2:
        time.sleep(0.05)
    print(json.dumps({"workers": list(pool._processes), "tracker": resource_tracker._resource_tracker._pid}),
          flush=True)


if __name__ == "__main__":
    kind, work = sys.argv[1], Path(sys.argv[2])
    if kind == "prepare":
        from scratchlm.data.step import DocumentStep
        from scratchlm.executor import LocalExecutor
        from scratchlm.data.step_runner import StepRunner
        from scratchlm.data.units import Unit, UnitFile

        (work / "a.txt").write_text("a document")
        units = [Unit("s", "web", "text", i, (UnitFile(str(work / "a.txt"), f"s/{i}", "text"),), f"k{i}", 10)
                 for i in range(2)]
        run = StepRunner(units, work / "cache", LocalExecutor(2))
        threading.Thread(target=report, args=(lambda: run.executor._pool,), daemon=True).start()
        run.local([DocumentStep("hang", hang)])
    else:
        from tokenizers import Tokenizer, models
        from scratchlm.tokenizer.parallel import ParallelEncoder

        Tokenizer(models.BPE()).save(str(work / "tok.json"))
        encoder = ParallelEncoder(work / "tok.json", "uint16", None, workers=2)
        threading.Thread(target=lambda: list(encoder.executor.imap(time.sleep, [3600] * 2)), daemon=True).start()
        report(lambda: encoder.executor._pool)
        time.sleep(3600)
'''


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its parent's bookkeeping is left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("kind", ["prepare", "tokenize"])
def test_pool_workers_and_the_resource_tracker_exit_when_the_parent_is_killed(tmp_path, kind):
    script = tmp_path / "orphans.py"
    script.write_text(ORPHAN_SCRIPT)
    parent = subprocess.Popen([sys.executable, str(script), kind, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(parent.stdout.readline())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    children = started["workers"] + ([started["tracker"]] if started["tracker"] else [])
    assert len(started["workers"]) == 2
    deadline = time.monotonic() + 60  # generous: this checks that they exit, not how fast
    while any(map(_running, children)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in children if _running(pid)]
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after their parent was killed: {left}"


# 5. Memory on one huge document -----------------------------------------------------------------------------------

def test_a_text_file_too_long_for_max_chars_is_refused_unread(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "huge.txt").write_bytes(b"x" * 50_000)
    (tmp_path / "d" / "huge.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(b"y" * 50_000))
    (tmp_path / "d" / "fine.txt").write_text("a document of a normal size")
    out, stats = _prepare(_config(tmp_path, {"s": "d"}, max_chars=10_000))
    assert stats["sources"]["s"]["dropped"] == {"too_long": 2}
    details = sorted(r["detail"] for r in _ledger(out) if r["rule"] == "too_long")
    assert details[0].startswith("50,000 bytes, over 40,000")
    assert details[1].startswith("over 40,000 bytes decompressed")
    assert all(d.endswith("not read") for d in details)


# 6. A moved workdir -----------------------------------------------------------------------------------------------

def test_a_moved_workdir_reuses_every_cached_step_and_the_dedup_decisions(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "in.jsonl").write_bytes(_lines(30) + _lines(5))  # five exact copies for dedup to decide
    _, first = _prepare(_config(tmp_path / "a", {"s": "in.jsonl"}, skip=[]))
    dedup_entries = sorted(p.name for p in (tmp_path / "a" / "run" / "data" / "cache" / "find_duplicates").iterdir())
    os.rename(tmp_path / "a", tmp_path / "b")
    cfg = _config(tmp_path / "b", {"s": "in.jsonl"}, skip=[])
    _, again = _prepare(cfg)
    assert again["cache"] == {step: 1 for step in again["cache"]}, again["cache"]  # one unit, every step cached
    assert sorted(p.name for p in (cfg.workdir / "data" / "cache" / "find_duplicates").iterdir()) == dedup_entries
    assert again["sources"]["s"]["dropped"] == first["sources"]["s"]["dropped"]


# 7. File names and the workdir ------------------------------------------------------------------------------------

def _raw_name(folder: Path, name: bytes, data: bytes) -> None:
    """A file whose name is not UTF-8: only a bytes path can spell it."""
    with open(os.path.join(os.fsencode(folder), name), "wb") as f:
        f.write(data)


def test_a_file_name_that_is_not_utf8_goes_through_data_prepare(tmp_path, capsys):
    from scratchlm.cli import main

    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "plain.txt").write_text("a document with a plain name")
    _raw_name(tmp_path / "f", b"caf\xe9.txt", "un document au nom en latin-1".encode())
    _raw_name(tmp_path / "f", b"vide\xff.txt", b"")  # rejected: its name goes to the ledger
    cut = zstandard.ZstdCompressor().compress(_lines(300))
    _raw_name(tmp_path / "f", b"cut\xe9.jsonl.zst", cut[:len(cut) // 2])  # rejected, its name in the detail too
    (tmp_path / "c.toml").write_text(f"[data]\nmin_chars = 10\nworkers = 1\nskip = {json.dumps(CONTENT_STEPS)}\n"
                                     '[[data.sources]]\nname = "s"\ndomain = "web"\npath = "f"\n')
    assert main(["data", "prepare", "-c", str(tmp_path / "c.toml")]) == 0
    (out,) = [p.parent for p in (tmp_path / "run" / "data").glob("*/stats.json")]
    kept = [d["id"] for f in (out / "train").glob("*.zst") for d in read_jsonl(f)]
    kept += [d["id"] for d in read_jsonl(out / "val" / "web.jsonl")] if (out / "val" / "web.jsonl").exists() else []
    assert sorted(kept) == ["s/caf%E9.txt", "s/plain.txt"]
    ledger = {r["id"]: r for r in _ledger(out)}
    assert ledger["s/vide%FF.txt"]["rule"] == "empty_file"
    assert ledger["s/cut%E9.jsonl.zst:1"]["detail"].startswith("cut%E9.jsonl.zst: ")
    assert "s/caf%E9.txt" in json.loads((out / "stats.json").read_text())["units"]["s-00000"]["files"]
    capsys.readouterr()
    assert main(["data", "explain", "-c", str(tmp_path / "c.toml"), "s/caf%E9.txt"]) == 0  # the escaped ID is usable
    assert "read" in capsys.readouterr().out


def _source_holding_the_workdir(tmp_path: Path, path: str):
    (tmp_path / "src").mkdir()
    for i in range(5):
        (tmp_path / "src" / f"d{i}.txt").write_text(f"document {i} with enough text to keep")
    cfg = _config(tmp_path, {"s": path})
    cfg.run.workdir = "src/work"
    return cfg


@pytest.mark.parametrize("path", ["src", "src/**/*"])
def test_a_workdir_inside_a_source_is_never_read_back(tmp_path, capsys, path):
    # A second prepare once read the first one's cache and ledger as documents: 506 documents in instead of 5.
    from scratchlm.data.readers import source_files

    cfg = _source_holding_the_workdir(tmp_path, path)
    counts = [_prepare(cfg, tmp_path / f"out{k}")[1]["sources"]["s"]["docs_in"] for k in range(2)]
    assert counts == [5, 5]
    listed = source_files(cfg.data.sources[0], cfg.base_dir, cfg.workdir)  # what the data ID is to hash
    assert listed == [tmp_path / "src" / f"d{i}.txt" for i in range(5)]
    said = [line for line in capsys.readouterr().err.splitlines() if "skipping the workdir" in line]
    assert said == [f"source `s`: skipping the workdir {tmp_path / 'src' / 'work'} inside it"] * 2  # once a prepare


def test_a_workdir_inside_a_source_keeps_the_data_id(tmp_path):
    from scratchlm.stages import plan_artifacts

    cfg = _source_holding_the_workdir(tmp_path, "src")
    first = plan_artifacts(cfg)["data"].id
    _prepare(cfg)
    assert plan_artifacts(cfg)["data"].id == first
