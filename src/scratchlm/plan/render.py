"""The plan as text for a terminal and as Markdown for the run report."""
from __future__ import annotations

from ..md import cell
from ..progress import duration
from .hardware import GiB

MARK = {"ok": "ok", "warning": "WARNING", "error": "ERROR", "not available": "n/a"}


def _b(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / GiB:.2f} GiB" if n >= GiB / 4 else f"{n / 2 ** 20:.1f} MiB"


def _f(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} "


def compile_text(d: dict) -> str:
    """The decision, then the measurements it was made from (when the probe measured them)."""
    text = f"{'yes' if d['compile'] else 'no'}: {d['reason']}"
    if "compiled_step_seconds" in d:
        text += (f" (eager {d['eager_step_seconds']:.3f} s/step, compiled {d['compiled_step_seconds']:.3f} s/step, "
                 f"compile {d['compile_seconds']:.1f} s)")
    return text


def plan_rows(plan: dict) -> list[tuple[str, str]]:
    a, mem, p, tp = plan["arithmetic"], plan["memory"], plan["probe"], plan["time"]
    c = mem["configured"]
    rows = [("model", plan["model"])] if "model" in plan else []  # plans saved before the row existed lack it
    rows += [
        ("device", f"{plan['target']['name']} — {_b(plan['target']['memory'])} ({plan['target']['memory_note']}), "
                   f"{plan['precision']}"),
        ("parameters", f"{a['params']:,} ({a['params_non_embedding']:,} without embeddings; vocab "
                       f"{a['vocab_size']:,} from {plan['vocab_from']})"),
        ("FLOPs per token", f"{_f(a['flops_per_token'])}FLOP = 6N {_f(a['flops_per_token_dense'])}FLOP + "
                            f"attention {_f(a['flops_per_token_attention'])}FLOP"),
        ("tokens needed", f"{a['tokens_needed']:,} at {a['tokens_per_param']:g} tokens/param "
                          f"(20-100: {a['tokens_needed_range'][0]:,} - {a['tokens_needed_range'][1]:,})"),
        ("planned training", f"{a['planned_tokens']:,} tokens = {a['planned_tokens_per_param']:.1f}/param, "
                             f"{_f(a['planned_flops'])}FLOP ({_f(a['needed_flops'])}FLOP at the ratio)"),
        ("corpus", f"{plan['corpus']['tokens']:,} tokens ({plan['corpus']['how']})"),
        ("memory: weights", f"{_b(c['weights'])} fp32 (the master weights), grads {_b(c['gradients'])}, "
                            f"optimizer {_b(c['optimizer'])}, autocast weight copies {_b(c['weight_copies'])}"),
        ("memory: activations", f"{_b(mem['activations_without_checkpointing'])} without checkpointing, "
                                f"{_b(mem['activations_with_checkpointing'])} with (micro-batch {c['micro_batch']}, "
                                f"seq_len {plan['batch']['tokens'] // plan['batch']['sequences']})"),
        ("memory: step peak", f"{_b(c['peak'])} at the {c['peak_phase']} (+ a chunk of logits "
                              f"{_b(c['logits_chunk'])} and the head weight's gradient {_b(c['head_weight_grad'])} "
                              "included)"),
        ("memory: overhead", f"{_b(c['overhead'])} ({c['overhead_note']})"),
        ("memory: total", f"{_b(c['total'])} of {_b(plan['target']['memory'])}"),
    ]
    r = mem["recommendation"]
    rows.append(("recommended batch", (f"micro-batch {r['micro_batch']} x grad_accum {r['grad_accum']}"
                                       + (" with activation checkpointing" if r["activation_checkpointing"] else "")
                                       + f" ({_b(r['total'])})") if r["fits"] else "nothing fits"))
    if p:
        mfu_ds = f", {p['mfu_datasheet']:.1%} of the datasheet's dense {_f(p['datasheet_peak_flops'])}FLOP/s" \
            if p.get("mfu_datasheet") is not None else ", no datasheet peak known for this device"
        rows += [
            ("probe", f"{p['steps_timed']} steps on {p['batches']}, micro-batch {p['micro_batch']} x "
                      f"{p['grad_accum']}: {p['step_seconds']:.3f} s/step ({p['micro_seconds']:.3f} s per "
                      f"micro-batch, {p['optimizer_step_seconds']:.3f} s optimizer)" + _windows(p)),
            ("throughput", f"{p['tokens_per_s']:,.0f} tokens/s, {_f(p['achieved_flops'])}FLOP/s"),
            ("MFU", f"{p['mfu_measured_peak']:.1%} of the measured matmul peak {_f(p['matmul_peak_flops'])}FLOP/s"
                    + mfu_ds),
            ("peak memory", f"measured {_b(p['peak_memory'])} vs estimated "
                            f"{_b(plan['memory_comparison']['estimate'])} "
                            f"({plan['memory_comparison']['ratio']:.2f}x; {p['memory_method']})"),
        ]
    else:
        why = plan.get("not_probed") or (  # plans saved before it was recorded
            "the target is not this machine's device" if not plan["target"]["local"] else "the step does not fit "
            "in memory")
        rows.append(("probe", f"not run ({why})"))
    if plan.get("compile"):  # plans saved before the decision existed lack it
        rows.append(("compile", compile_text(plan["compile"])))
    if tp:
        rows.append(("time", f"{duration(tp['total_seconds'])} = training {duration(tp['train_seconds'])}"
                             + (f" (compile {duration(tp['compile_seconds'])} included)"
                                if tp.get("compile_seconds") else "")
                             + f" + {tp['checkpoints']} checkpoints {duration(tp['checkpoint_seconds'])} + "
                             + (f"{tp['evaluations']} evaluations by the eval watcher (not in this time) + "
                                if tp.get("eval_external") else
                                f"{tp['evaluations']} evaluations {duration(tp['eval_seconds'])} + ")
                             + "one restart "
                             f"{duration(tp['restart_seconds'])} ({tp['restart_lost_steps']} steps lost)"))
        if "cost" in tp:
            rows.append(("cost", f"{tp['cost']:,.2f} at {tp['price_per_hour']:g}/hour"))
    if plan.get("budget_hours") is not None:  # plans saved before the row existed lack budget_from
        rows.append(("budget", f"{plan['budget_hours']:g} h (from {plan.get('budget_from') or '--budget-hours'})"))
    return rows


def _windows(probe: dict) -> str:
    """How the step time was taken, and when (plans saved before the windows lack them)."""
    if "window_micro_seconds" not in probe:
        return ""
    n = len(probe["window_micro_seconds"])
    which = "the second fastest" if n >= 4 else "the fastest"
    return (f"; {which} of {n} windows, the slowest {probe['spread']:.0%} slower than the fastest; measured "
            f"{probe['measured_at']}")


def render_plan(plan: dict) -> str:
    rows = plan_rows(plan)
    width = max(len(k) for k, _ in rows)
    out = ["scratchlm plan" + (f" for {plan['config']}" if plan["config"] else ""), ""]
    out += [f"  {k:<{width}}  {v}" for k, v in rows]
    out += ["", "verdicts:"]
    for v in plan["verdicts"]:
        out.append(f"  [{MARK[v['level']]:>7}] {v['name']}: {v['summary']}")
    s = plan.get("suggestion")
    if s:
        out += ["", f"largest model of the same family that fits ({', '.join(s['why'])}):"]
        out += [f"  {line}" for line in s["diff"].splitlines()] if s["fits"] else [f"  {s['text']}"]
    out += ["", f"plan: {plan['level'].upper()}" + (f" (saved to {plan['path']})" if plan.get("path") else "")]
    return "\n".join(out)


def plan_markdown(plan: dict) -> list[str]:
    """The report section: the same rows as a table, then the verdicts."""
    md = ["## Plan", "", f"Made before training (plan {plan['level']}).", "", "| item | value |", "|---|---|"]
    md += [f"| {k} | {cell(v)} |" for k, v in plan_rows(plan)]
    md += ["", "| check | verdict | detail |", "|---|---|---|"]
    md += [f"| {v['name']} | {v['level']} | {cell(v['summary'])} |" for v in plan["verdicts"]]
    s = plan.get("suggestion")
    if s and s["fits"]:
        md += ["", "Largest model of the same family that fits:", "", "```diff", s["diff"], "```"]
    return md + [""]
