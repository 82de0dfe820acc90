"""Does the plan's forecast hold still on a busy machine? (issue 44)

Run: PYTHONPATH=src python bench/plan_stability.py -c CONFIG [--runs 5] [--busy 1] [--probe-seconds 3]

Runs `scratchlm plan --remeasure --json` --runs times on one prepared config while --busy processes spin on the
CPU beside it (0: an idle machine), and prints, per plan, the forecast training time and the step time it rests
on: the second fastest probe window (what the plan uses) and the median over all timed micro-batches (what it used
before), both from the same probe. The ratio slowest/fastest plan is given for each. Then it checks that `plan`
and the plan `scratchlm run` makes judge a budget alike: with --budget-hours set just under and just over the last
forecast, `plan` and stages.stage_plan (what `run` calls) must give the same time verdict from the same numbers.
"""
import argparse
import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

from scratchlm.errors import UserError
from scratchlm.stages import load_config, plan_artifacts, stage_plan


def spin() -> None:
    while True:
        pass


def plan_json(config: str, probe_seconds: float, *flags: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "scratchlm", "plan", "-c", config, "--json",
                          "--probe-seconds", str(probe_seconds), *flags], capture_output=True, text=True, check=False)
    if not out.stdout.strip():
        raise SystemExit(out.stderr)
    return json.loads(out.stdout)


def time_level(plan: dict) -> str:
    return next(v["level"] for v in plan["verdicts"] if v["name"] == "time")


def stability(config: str, runs: int, probe_seconds: float) -> dict:
    rows = []
    for i in range(runs):
        plan = plan_json(config, probe_seconds, "--remeasure")
        p, t = plan["probe"], plan["time"]
        rows.append({"forecast_min": t["total_seconds"] / 60, "train_min": t["train_seconds"] / 60,
                     "window_micro_s": p["micro_seconds"], "median_micro_s": p["median_micro_seconds"],
                     "spread": p["spread"], "compile": plan["compile"]["compile"]})
        print(f"plan {i + 1}: forecast {rows[-1]['forecast_min']:.2f} min (training {rows[-1]['train_min']:.2f}), "
              f"micro-batch {p['micro_seconds'] * 1e3:.1f} ms low window vs {p['median_micro_seconds'] * 1e3:.1f} "
              f"ms median of all, windows {p['spread']:.0%} apart, other processes {p['other_load'] or 0:.0%} of the CPUs, "
              f"compile {plan['compile']['compile']}", flush=True)
    ratio = {k: max(r[k] for r in rows) / min(r[k] for r in rows)
             for k in ("forecast_min", "window_micro_s", "median_micro_s")}
    print(f"slowest/fastest of {runs} plans: forecast {ratio['forecast_min']:.3f}x, step from the low window "
          f"{ratio['window_micro_s']:.3f}x, step from the median {ratio['median_micro_s']:.3f}x")
    return {"rows": rows, "ratio": ratio}


def plan_then_run(config: str, probe_seconds: float, forecast_min: float) -> list[tuple[float, str, str]]:
    out = []
    for factor in (0.9, 1.1):
        hours = forecast_min * factor / 60
        planned = time_level(plan_json(config, probe_seconds, "--budget-hours", f"{hours:.6f}"))
        cfg = load_config(config)
        try:  # the plan `scratchlm run` makes before training, with the same flags
            ran = time_level(stage_plan(cfg, plan_artifacts(cfg), budget_hours=hours, probe_seconds=probe_seconds))
        except UserError as e:  # a plan in error stops `run`
            ran = "error" if "time:" in str(e) else f"refused: {e}"
        out.append((hours, planned, ran))
        print(f"budget {hours * 60:.2f} min: plan says {planned}, run's plan says {ran}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("-c", "--config", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--busy", type=int, default=1, help="spinning processes beside the plans")
    ap.add_argument("--probe-seconds", type=float, default=3.0)
    args = ap.parse_args()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for s in spinners:
        s.start()
    try:
        print(f"{args.busy} busy process(es) beside the plans; config {Path(args.config).resolve()}")
        result = stability(args.config, args.runs, args.probe_seconds)
        plan_then_run(args.config, args.probe_seconds, result["rows"][-1]["forecast_min"])
    finally:
        for s in spinners:
            s.terminate()
