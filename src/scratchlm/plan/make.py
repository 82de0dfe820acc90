"""`scratchlm plan`: put arithmetic, memory, probe, extrapolation and verdicts together into one plan."""
from __future__ import annotations

from dataclasses import asdict, replace

import torch

from ..config import Config, ModelConfig
from ..errors import UserError
from ..ids import read_json, write_json
from ..model import GPT
from ..model.device import pick_device, pick_precision
from ..monitor.throughput import peak_flops
from ..pipeline import Artifact
from ..presets import describe_preset
from ..progress import log
from ..train.batch import EffectiveBatch, effective_batch, ranks_launched
from ..train.compile_choice import decide_compile
from .arithmetic import (DEFAULT_TOKENS_PER_PARAM, check_model_size, count_params, flops_per_token, model_arithmetic,
                         tokens_needed)
from .budget import plan_path, resolve_budget
from .corpus import corpus_tokens, document_lengths
from .extrapolate import extrapolate
from .hardware import GiB, resolve_target
from .memory import divisors, estimate_memory, recommend_batch
from .peakmem import rss_bytes
from .saved_probe import probe_key, saved_probe, settle_compile_seconds, stamp
from .shrink import config_diff, largest_fitting
from .verdicts import (MEMORY_HEADROOM, Verdict, busy_verdict, context_verdict, corpus_verdict, epochs_verdict,
                       estimate_verdict, memory_verdict, time_verdict, worst)

ASSUMED_CUDA_CONTEXT = GiB // 2  # typical CUDA context + cuBLAS workspace; measured when the GPU is local
PROBE_MAX_MICRO_SECONDS = 20.0  # a micro-batch predicted slower than this is probed at a smaller size
PROBE_ASSUMED_MFU = 0.25  # only to predict that time, before anything is measured


def check_model_buildable(m: ModelConfig, vocab: int, where: str) -> None:
    """The ranges of each key were checked when the config loaded; this catches what only building finds. The size
    is checked again here with the vocabulary the tokenizer really has."""
    check_model_size(m, vocab, where)
    try:  # one block: every block is built from the same keys, and thousands of them take minutes even on meta
        with torch.device("meta"):
            GPT(replace(m, n_layer=1), vocab)
    except Exception as e:  # noqa: BLE001 - any failure here is a config the trainer could not use either
        raise UserError(f"{where}: the [model] section cannot build a model: {str(e).splitlines()[0]}") from None


def vocab_size(cfg: Config, art: dict[str, Artifact]) -> tuple[int, str]:
    if art["shards"].done:
        return read_json(art["shards"].dir / "shards.json")["vocab_size"], "shards.json"
    if art["tokenizer"].done:
        return read_json(art["tokenizer"].dir / "tokenizer_info.json")["vocab_size"], "the trained tokenizer"
    return cfg.tokenizer.vocab_size, "tokenizer.vocab_size (not trained yet)"


def _framework_overhead(target, device: torch.device) -> tuple[int, str]:
    if not target.local:
        return ASSUMED_CUDA_CONTEXT, "assumed CUDA context (~0.5 GiB, typical; not measured here)"
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        used = total - free - torch.cuda.memory_reserved(device)
        return used, "measured: device memory in use outside torch's allocator (CUDA context, other processes)"
    return rss_bytes(), "measured: this process's resident memory before the model (Python, torch, libraries)"


def _probe_shape(cfg: Config, batch: EffectiveBatch, configured, rec: dict, arith: dict, peak: float,
                 memory: int) -> tuple[int, int, bool]:
    """The configured batch split when it fits, else the recommended one; smaller if a micro-batch would be slow."""
    if configured.total <= MEMORY_HEADROOM * memory:
        micro, accum, ckpt = batch.micro_batch, batch.grad_accum, configured.activation_checkpointing
    else:
        micro, accum, ckpt = rec["micro_batch"], rec["grad_accum"], rec["activation_checkpointing"]
    global_batch = micro * accum
    smaller = [d for d in divisors(global_batch) if d < micro]  # ascending: the next one down is the last
    while smaller and arith["flops_per_token"] * micro * cfg.model.seq_len / (peak * PROBE_ASSUMED_MFU) \
            > PROBE_MAX_MICRO_SECONDS:
        micro = smaller.pop()
    return micro, global_batch // micro, ckpt



def _measure(cfg: Config, art: dict[str, Artifact], vocab: int, device: torch.device, precision: str,
             batch: EffectiveBatch, configured, rec: dict, arith: dict, target, probe_seconds: float,
             key: dict) -> dict:
    """The probe of the training step on this machine, with the matmul peak, MFU and the kept compile time."""
    from .probe import run_probe

    log("plan: measuring the matmul peak and probing the training step")
    peak = peak_flops(device, precision, cfg.monitor.peak_flops)  # the trainer's own: cached per machine
    micro, accum, probe_ckpt = _probe_shape(cfg, batch, configured, rec, arith, peak, target.memory)
    shards_dir = art["shards"].dir if art["shards"].done else None
    probe = stamp(run_probe(cfg, vocab, device, precision, micro, accum, probe_ckpt, shards_dir, probe_seconds))
    achieved = arith["flops_per_token"] * probe["tokens_per_s"]
    datasheet = target.datasheet_peak.get(precision)  # gpu_peaks.datasheet_peak's, by exact SKU; None if unknown
    probe.update({"matmul_peak_flops": peak, "achieved_flops": achieved, "mfu_measured_peak": achieved / peak,
                  "datasheet_peak_flops": datasheet, "mfu_datasheet": achieved / datasheet if datasheet else None})
    if "compile" in probe:
        model_key = {**key, "model": vars(cfg.model), "probed": [micro, accum, probe_ckpt]}
        probe["compile"] = settle_compile_seconds(cfg.workdir, model_key, probe["compile"])
    return probe


def make_plan(cfg: Config, art: dict[str, Artifact], gpu: str | None = None, budget_hours: float | None = None,
              price_per_hour: float | None = None, tokens_per_param: float = DEFAULT_TOKENS_PER_PARAM,
              probe_seconds: float = 3.0, save: bool = True, remeasure: bool = False) -> dict:
    """remeasure: probe the step again even where the saved plan of this training measured it under the same
    conditions (plan/saved_probe.py)."""
    where = str(cfg.path) if cfg.path else "config"
    for built in (a for a in art.values() if a.done):  # the plan reads shards.json, the tokenizer, the corpus
        built.check_whole()
    budget = resolve_budget(cfg, art["train"].id, budget_hours, price_per_hour)  # flag, [plan], or the saved plan
    budget_hours, price_per_hour = budget.hours, budget.price_per_hour
    if tokens_per_param <= 0:
        raise UserError(f"--tokens-per-param must be > 0, got {tokens_per_param:g}")
    vocab, vocab_from = vocab_size(cfg, art)
    check_model_buildable(cfg.model, vocab, where)
    t, m = cfg.train, cfg.model
    device = pick_device(t.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{where}: `train.device` is cuda but no CUDA device is visible")
    target = resolve_target(gpu, device)
    precision = pick_precision(t.precision, device) if target.local else (
        "bf16" if t.precision == "auto" else t.precision)
    ckpt = t.activation_checkpointing
    batch = effective_batch(cfg, ranks_launched())
    rank_batch = batch.micro_batch * batch.grad_accum  # the sequences of a step on one device: what memory sees
    arith = model_arithmetic(m, vocab, batch.tokens, t.max_steps, tokens_per_param)
    overhead, overhead_note = _framework_overhead(target, device)

    def estimate(model_cfg: ModelConfig, micro: int, accum: int, checkpointing: bool):
        return estimate_memory(model_cfg, vocab, micro, accum, precision, t.optimizer, target.device_type,
                               checkpointing, overhead, overhead_note, update_ratio=cfg.monitor.update_ratio)

    configured = estimate(m, batch.micro_batch, batch.grad_accum, ckpt)
    memory = {"configured": configured.as_dict(),
              "activations_without_checkpointing": configured.activations_no_ckpt,
              "activations_with_checkpointing": configured.activations_ckpt}
    rec = recommend_batch(m, vocab, rank_batch, precision, t.optimizer, target.device_type, target.memory,
                          overhead, ckpt, MEMORY_HEADROOM, update_ratio=cfg.monitor.update_ratio)
    memory["recommendation"] = rec
    verdicts = [memory_verdict(configured.total, target.memory, rec,
                               {"activation_checkpointing": ckpt})]

    probe, time_plan, comparison = None, None, None
    corpus = corpus_tokens(cfg, art)
    fits_somehow = configured.total <= MEMORY_HEADROOM * target.memory or rec["fits"]
    # A step larger than the whole corpus is a typo (batch_size = 1000000000), and probing it would run for hours
    oversized = bool(corpus["tokens"]) and batch.tokens > corpus["tokens"]
    if oversized:
        verdicts.append(Verdict("batch", "error", f"one step holds {batch.tokens:,} tokens, more than the whole "
                                f"corpus ({corpus['tokens']:,}); lower train.batch_size (the step was not probed)",
                                {"tokens_per_step": batch.tokens, "corpus_tokens": corpus["tokens"]}))
    not_probed = ("the target is not this machine's device" if not target.local else
                  "the step does not fit in memory" if not fits_somehow else
                  "one step is larger than the corpus" if oversized else
                  "--probe-seconds 0" if probe_seconds <= 0 else None)
    key = None
    if not_probed is None:
        if t.threads and device.type == "cpu":  # as the probe and the trainer run: the key names the threads
            torch.set_num_threads(t.threads)
        key = probe_key(device, target.name, precision,
                        {"micro_batch": batch.micro_batch, "grad_accum": batch.grad_accum,
                         "as_configured": configured.total <= MEMORY_HEADROOM * target.memory,
                         "activation_checkpointing": ckpt}, t.compile)
        probe = None if remeasure else saved_probe(cfg.workdir, art["train"].id, key)
        if probe is not None:
            log(f"plan: step timings of {probe.get('measured_at', 'the saved plan')} reused (same config, machine, "
                "threads and torch); --remeasure measures them again")
        else:
            probe = _measure(cfg, art, vocab, device, precision, batch, configured, rec, arith, target, probe_seconds,
                             key)
        micro, accum, probe_ckpt = probe["micro_batch"], probe["grad_accum"], probe["activation_checkpointing"]
        compared = estimate(m, micro, accum, probe_ckpt)
        comparison = {"estimate": compared.peak, "measured": probe["peak_memory"],
                      "ratio": compared.peak / max(1, probe["peak_memory"]), "micro_batch": micro,
                      "grad_accum": accum, "phase": compared.peak_phase}
        verdicts.append(estimate_verdict(compared.peak, probe["peak_memory"], probe["memory_method"]))
        busy = busy_verdict(probe)
        if busy is not None:
            verdicts.append(busy)
    n_domains = len(read_json(art["shards"].dir / "shards.json")["val"]) if art["shards"].done else \
        len({s.domain for s in cfg.data.sources})
    lower_bound = None
    compile_decision = decide_compile(t.compile, probe.get("compile") if probe else None, t.max_steps)
    if probe is not None:
        time_plan = extrapolate(cfg, probe, n_domains, len(cfg.eval.prompts) or n_domains, price_per_hour,
                                compile_decision)
        verdicts.append(time_verdict(time_plan["total_seconds"], budget_hours, measured=True))
    else:
        peak_flops = target.datasheet_peak.get(precision)
        lower_bound = arith["planned_flops"] / (peak_flops * batch.world) if peak_flops else None
        verdicts.append(time_verdict(None, budget_hours, measured=False, lower_bound_seconds=lower_bound,
                                     not_probed=not_probed))
    verdicts[:0] = [corpus_verdict(corpus, arith), epochs_verdict(corpus, arith)]
    verdicts.append(context_verdict(document_lengths(art, m.seq_len), m.seq_len))

    suggestion = None
    failing = {v.name for v in verdicts if v.level == "error" or (v.name == "corpus" and v.level != "ok")}
    if failing & {"memory", "time", "corpus"}:
        suggestion = _suggest(cfg, batch, vocab, precision, target, overhead, corpus, budget_hours,
                              tokens_per_param, time_plan, lower_bound, arith, failing)
    plan = {"config": str(cfg.path) if cfg.path else None, "train_id": art["train"].id,
            "model": describe_preset(m) or "no preset: the shape of the [model] keys", "target": vars(target),
            "precision": precision, "vocab_from": vocab_from, "batch": asdict(batch),
            "budget_hours": budget_hours, "budget_from": budget.source, "price_per_hour": price_per_hour,
            "arithmetic": arith, "memory": memory, "probe": probe, "probe_key": key, "not_probed": not_probed,
            "compile": compile_decision,
            "memory_comparison": comparison, "time": time_plan, "corpus": corpus,
            "verdicts": [v.as_dict() for v in verdicts], "suggestion": suggestion,
            "level": worst(v.level for v in verdicts)}
    if save:
        path = plan_path(cfg.workdir, art["train"].id)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, plan)
        plan["path"] = str(path)
    return plan


def _suggest(cfg: Config, batch: EffectiveBatch, vocab: int, precision: str, target, overhead: int, corpus: dict,
             budget_hours: float | None, tokens_per_param: float, time_plan: dict | None,
             lower_bound: float | None, arith: dict, failing: set[str]) -> dict | None:
    t, m = cfg.train, cfg.model
    rank_batch = batch.micro_batch * batch.grad_accum
    seconds = time_plan["total_seconds"] if time_plan else lower_bound
    ckpt = t.activation_checkpointing

    def fits(cand: ModelConfig) -> dict | None:
        # the one-formula tests first, the batch search last: a deep model's family has a member per layer
        if "corpus" in failing and tokens_needed(count_params(cand, vocab).total, tokens_per_param) > corpus["tokens"]:
            return None
        if budget_hours is not None and seconds is not None:
            # same steps and batch; time scales with FLOPs per token at the MFU measured for this model
            scale = flops_per_token(cand, vocab)["total"] / arith["flops_per_token"]
            if seconds * scale > budget_hours * 3600:
                return None
        rec = recommend_batch(cand, vocab, rank_batch, precision, t.optimizer, target.device_type,
                              target.memory, overhead, ckpt, MEMORY_HEADROOM, update_ratio=cfg.monitor.update_ratio)
        if not rec["fits"]:
            return None
        extra = {}
        if rec["micro_batch"] != t.batch_size:
            extra["batch_size"] = (t.batch_size, rec["micro_batch"])
            extra["grad_accum"] = (t.grad_accum, rec["grad_accum"])
        if rec["activation_checkpointing"] and not ckpt:
            extra["activation_checkpointing"] = (False, True)
        return extra

    found = largest_fitting(m, vocab, fits)
    if found is None:
        return {"fits": False, "why": sorted(failing), "text": "no smaller model of the same family fits"}
    return {"fits": True, "why": sorted(failing), "params": found["params"],
            "diff": config_diff(m, found["model"], found["extra"])}
