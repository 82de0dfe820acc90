"""The one table of datasheet peaks (scratchlm/gpu_peaks.py): exact SKU names, dense figures, no guesses for an
unknown name; and every MFU "against the datasheet" (trainer log, plan, report) goes through its one function."""
from types import SimpleNamespace

import pytest
import torch

from scratchlm import gpu_peaks
from scratchlm.config import config_from_dict
from scratchlm.gpu_peaks import GiB, datasheet_peak, spec_for

# name as torch.cuda.get_device_properties(dev).name reports it -> (table key, dense bf16 TFLOP/s)
SKUS = {
    "NVIDIA H100 80GB HBM3": ("h100", 989.4),
    "NVIDIA H100 PCIe": ("h100-pcie", 756.0),
    "NVIDIA H100 NVL": ("h100-nvl", 835.5),
    "NVIDIA H200": ("h200", 989.4),
    "NVIDIA A100-SXM4-80GB": ("a100-sxm4-80gb", 312.0),
    "NVIDIA A100 80GB PCIe": ("a100-pcie-80gb", 312.0),
    "NVIDIA A100-SXM4-40GB": ("a100-sxm4-40gb", 312.0),
    "NVIDIA A100-PCIE-40GB": ("a100-pcie-40gb", 312.0),
    "NVIDIA L4": ("l4", 121.0),
    "NVIDIA L40S": ("l40s", 362.05),
    "NVIDIA GeForce RTX 4090": ("rtx4090", 165.2),
    "NVIDIA GeForce RTX 3090": ("rtx3090", 71.0),
}


def _props(name: str, sms: int, gib: float) -> SimpleNamespace:
    return SimpleNamespace(name=name, multi_processor_count=sms, total_memory=int(gib * GiB))


@pytest.mark.parametrize("name", sorted(SKUS))
def test_each_sku_name_gets_its_own_dense_peak(name):
    key, bf16 = SKUS[name]
    assert spec_for(name).key == key
    assert datasheet_peak(name, "bf16") == pytest.approx(bf16 * 1e12)
    assert datasheet_peak(name, "fp16") == datasheet_peak(name, "bf16")  # fp32 accumulation: the same rate
    assert datasheet_peak(name, "fp32") <= datasheet_peak(name, "tf32") < datasheet_peak(name, "bf16")
    # the device's properties as torch returns them match the same row, whatever their SM count
    assert spec_for(_props(name, 1, 1)).key == key


def test_h100_and_h200_are_the_dense_989_not_the_sparse_1979():
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "bf16") == datasheet_peak("NVIDIA H200", "bf16") == 989.4e12


def test_h100_pcie_and_nvl_are_not_sxm():
    sxm = datasheet_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert datasheet_peak("NVIDIA H100 PCIe", "bf16") == 756e12 < sxm
    assert datasheet_peak("NVIDIA H100 NVL", "bf16") == 835.5e12 < sxm


@pytest.mark.parametrize("sms, gib, key", [(114, 79.6, "h100-pcie"), (132, 79.6, "h100"), (132, 93.6, "h100-nvl"),
                                           (132, 95.6, None), (16, 9.8, None)])
def test_an_h100_name_the_table_lacks_is_told_apart_by_sm_count_and_memory(sms, gib, key):
    spec = spec_for(_props("NVIDIA H100", sms, gib))
    assert (spec.key if spec else None) == key


@pytest.mark.parametrize("name", ["NVIDIA H800", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "Tesla T4",
                                  "NVIDIA A100", "NVIDIA GH200 480GB", "NVIDIA H200 NVL", "NVIDIA L40", ""])
def test_an_unknown_name_gets_no_peak(name):
    assert spec_for(name) is None and datasheet_peak(name, "bf16") is None
    assert datasheet_peak("NVIDIA H100", "bf16") is None  # a bare name, without the properties to tell it apart
    assert datasheet_peak(_props(name, 132, 79.6), "bf16") is None  # an SXM's shape does not make it one


def test_a_mig_slice_of_an_h100_gets_none_even_with_full_sms():
    assert datasheet_peak(_props("NVIDIA H100 80GB HBM3 MIG 7g.80gb", 132, 79.6), "bf16") is None


def test_cpu_and_unknown_precision_get_none():
    assert datasheet_peak(torch.device("cpu"), "bf16") is None
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "fp8") is None
    assert gpu_peaks.datasheet_peaks(torch.device("cpu")) == {}


@pytest.fixture
def fake_peak(monkeypatch):
    """datasheet_peak replaced: a consumer that reads the table any other way does not see it."""
    def fake(device_or_name, precision):
        return {"bf16": 2e12, "fp32": 1e12}.get(precision)

    monkeypatch.setattr(gpu_peaks, "datasheet_peak", fake)


def test_the_plan_uses_the_one_function(fake_peak):
    from scratchlm.plan.hardware import local_target, resolve_target

    assert resolve_target("h100-pcie", torch.device("cpu")).datasheet_peak == {"bf16": 2e12, "fp32": 1e12}
    assert local_target(torch.device("cpu")).datasheet_peak == {"bf16": 2e12, "fp32": 1e12}


def test_plan_presets_come_from_the_table():
    from scratchlm.plan.hardware import resolve_target

    t = resolve_target("h100-pcie", torch.device("cpu"))
    assert not t.local and t.name == "NVIDIA H100 PCIe (80 GB)" and t.datasheet_peak["bf16"] == 756e12
    assert resolve_target("a100-80gb", torch.device("cpu")).preset == "a100-sxm4-80gb"  # the older key still works


def _monitor(tmp_path):
    from scratchlm.model import GPT
    from scratchlm.monitor.monitor import Monitor

    cfg = config_from_dict({"data": {"sources": [{"name": "x", "domain": "x", "path": "x"}]},
                            "model": {"n_layer": 1, "d_model": 32, "n_head": 2, "seq_len": 16},
                            "monitor": {"peak_flops": 1e12}})
    return Monitor(cfg, tmp_path, GPT(cfg.model, 64), torch.device("cpu"), "bf16")


def test_the_trainer_log_uses_the_one_function(tmp_path, fake_peak):
    monitor = _monitor(tmp_path)
    row = monitor.on_log(5, {"step": 5, "loss": 3.0, "tokens_per_s": 1000.0}, 1.0, 0.0)
    achieved = 1000.0 * monitor.flops_per_token
    assert row["mfu"] == pytest.approx(achieved / 1e12)  # the measured (here: configured) peak, as before
    assert row["mfu_datasheet"] == pytest.approx(achieved / 2e12)
    assert monitor.close()["datasheet_peak_flops"] == 2e12


def test_the_trainer_log_on_a_cpu_has_the_measured_mfu_only(tmp_path):
    monitor = _monitor(tmp_path)
    row = monitor.on_log(5, {"step": 5, "loss": 3.0, "tokens_per_s": 1000.0}, 1.0, 0.0)
    assert "mfu" in row and "mfu_datasheet" not in row
    monitor.close()


def test_the_report_names_both_peaks():
    from scratchlm.report.build import _mfu_text

    assert _mfu_text({"mfu": 0.5}) == ", MFU 50.0% of the measured matmul peak"
    assert _mfu_text({"mfu": 0.5, "mfu_datasheet": 0.25}) == \
        ", MFU 25.0% of the GPU's dense datasheet peak (50.0% of the measured matmul peak)"
    assert _mfu_text({}) == ""
