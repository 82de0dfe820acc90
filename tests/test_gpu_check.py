"""bench/gpu_check.py, the first run on a rented GPU: its whole code path on CPU (--dry), a failing check recorded
while the next one runs, and MFU through the one datasheet function."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scratchlm import gpu_peaks

GPU_CHECK = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_check"]


def test_dry_run_records_every_check(tmp_path):
    """--dry: prepare, plan, train, check's resume test, eval, the numerical comparisons and a throughput probe,
    through the same functions as on a GPU, so the script cannot rot unseen."""
    r = subprocess.run([sys.executable, str(GPU_CHECK), "--dry", "--out", str(tmp_path),
                        "--workdir", str(tmp_path / "workdir")], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "SCRATCHLM_PROGRESS": "0"})
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    checks = {c["name"]: c for c in result["checks"]}
    p = result["checks"][2]["name"].split("/")[1]  # the CPU's precision: bf16 where native, else fp32
    loop = [f"loop/{p}/eager/{step}" for step in ("plan", "train", "resume", "eval")]
    assert list(checks) == ["prepare", "peaks", f"kernels/{p}", *loop, f"loop/{p}/head_loss",
                            f"loop/{p}/compiled", f"throughput/125m/{p}", f"torchrun/{p}"]
    failed = {n: c.get("summary") or c.get("error") for n, c in checks.items() if c["status"] != "pass"}
    assert failed == {f"torchrun/{p}": None}, r.stderr[-3000:]
    assert checks[f"torchrun/{p}"]["status"] == "skipped" and r.returncode == 0
    assert checks[f"kernels/{p}"]["flash"] == "not applicable (CPU)" and checks[f"kernels/{p}"]["attention_ops"]
    train = checks[f"loop/{p}/eager/train"]
    assert train["loss_last"] < train["loss_first"] and train["evaluations"] and train["checkpoints"]
    assert train["mfu_trainer_log"] > 0 and train["mfu_datasheet_trainer_log"] is None  # no datasheet for a CPU
    assert checks[f"loop/{p}/eager/resume"]["max_relative_difference"] <= 1e-3
    throughput = checks[f"throughput/125m/{p}"]
    assert throughput["eager"]["tokens_per_s"] > 0 and throughput["compiled"]["mfu_measured"] > 0
    assert throughput["estimate_peak_bytes"] > 0 and throughput["peak_allocated_bytes"] > 0
    table = (tmp_path / "gpu_check.md").read_text()
    assert all(f"| {name} | {c['status']} |" in table for name, c in checks.items())


def test_a_failing_check_is_recorded_and_the_next_one_runs(gpu_check, tmp_path):
    record = gpu_check.Record(tmp_path, torch.device("cpu"), {"device": "cpu", "gpus": 0, "torch": "x",
                                                              "dry": True, "workdir": "w", "checks": []})

    def broken():
        raise RuntimeError("out of memory\nsecond line")

    gpu_check.run_check(record, "first", broken, budget_s=600)
    gpu_check.run_check(record, "second", lambda: {"status": "pass", "summary": "fine"}, budget_s=600)
    gpu_check.run_check(record, "third", lambda: {"status": "pass"}, budget_s=0)
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    first, second, third = saved["checks"]
    assert first["status"] == "error" and first["error"] == "RuntimeError: out of memory"
    assert "broken" in first["traceback"]
    assert second["status"] == "pass" and third["status"] == "skipped" and "--budget-s" in third["reason"]
    assert saved["counts"] == {"pass": 1, "fail": 0, "error": 1, "skipped": 1}
    assert "| first | error | RuntimeError: out of memory |" in (tmp_path / "gpu_check.md").read_text()


def test_mfu_is_taken_against_the_one_datasheet_function(gpu_check, monkeypatch):
    monkeypatch.setattr(gpu_peaks, "datasheet_peak", lambda device, precision: 4e12)
    monkeypatch.setattr(gpu_check, "peak_flops", lambda device, precision: 1e12)
    m = gpu_check.mfu(1000.0, 1e9, torch.device("cpu"), "bf16")
    assert m["mfu_datasheet"] == 0.25 and m["mfu_measured"] == 1.0 and m["datasheet_peak_flops"] == 4e12
    monkeypatch.setattr(gpu_peaks, "datasheet_peak", lambda device, precision: None)
    assert gpu_check.mfu(1000.0, 1e9, torch.device("cpu"), "bf16")["mfu_datasheet"] is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_refuses_without_cuda_in_one_line_and_has_help():
    r = subprocess.run([sys.executable, str(GPU_CHECK)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "gpu_check: no CUDA device visible; this script checks a GPU (--dry runs its code path on CPU with a tiny "
        "shape)"]
    help_text = subprocess.run([sys.executable, str(GPU_CHECK), "--help"], capture_output=True, text=True,
                               timeout=120).stdout
    assert "--dry" in help_text and "--dry-run-cpu" in help_text and "--workdir" in help_text
