"""How the dashboard and the report show an eval watcher's evaluations (issue 21): rows appended out of step
order draw in step order, each evaluation says where it came from, and one summary feeds both."""
import json

from scratchlm.monitor.dashboard import write_dashboard
from scratchlm.monitor.report import monitoring_section
from scratchlm.monitor.watch_rows import in_step_order, watch_summary


def _eval(step, loss, watch=None):
    row = {"step": step, "eval": {"web": {"loss": loss, "bpb": loss / 2, "top1": 0.1, "top10": 0.3}},
           "val_loss": loss, "repetition": [0.0]}
    if watch is not None:
        row["watch"] = {"device": "cpu", "suite": "fast", "checkpoint": f"step_{step:07d}", "checkpoint_id": "x",
                        "saved_at": 100.0, "done_at": 100.0 + watch, "latency_s": watch, "eval_s": watch / 2,
                        "shared": True}
    return row


def _run(tmp_path):
    """Training rows to step 40; the inline evaluation of step 10; the watcher's of 20 and 40, appended late."""
    train = [{"step": s, "loss": 5.0 - s / 100, "lr": 1e-3, "tokens_per_s": 1000.0, "data_wait_share": 0.01,
              **({"watch_share": 0.75} if s >= 20 else {})} for s in range(5, 45, 5)]
    rows = train[:2] + [_eval(10, 4.9)] + train[2:] + [_eval(20, 4.7, watch=12.0), _eval(40, 4.5, watch=4.0)]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 45, "lo'  # a watcher mid-write: a torn line
    (tmp_path / "metrics.jsonl").write_text(text)
    return rows


def test_summary_counts_the_watchers_rows_only(tmp_path):
    rows = _run(tmp_path)
    summary = watch_summary(rows)
    assert summary == {"evaluations": 2, "inline": 1, "devices": ["cpu"], "shared": 2, "median_latency_s": 8.0,
                       "max_latency_s": 12.0, "median_eval_s": 4.0}
    assert watch_summary([r for r in rows if "watch" not in r]) is None
    assert [r["step"] for r in in_step_order(rows)] == sorted(r["step"] for r in rows)


def test_dashboard_and_report_show_where_each_evaluation_came_from(tmp_path):
    _run(tmp_path)
    page = write_dashboard(tmp_path, tmp_path / "out").read_text()
    assert "Step 40, mean validation loss 4.5; evaluated by the eval watcher on cpu, result 4.0 s after" in page
    assert "<h2>Evaluations beside the run</h2>" in page
    assert "2 evaluation(s) came from the eval watcher on cpu (2 of them on a device or CPU cores shared" in page
    assert "<td>step_0000020</td><td>cpu</td><td>fast</td><td>yes</td><td>6</td><td>12</td>" in page
    assert (tmp_path / "out" / "plots" / "data_wait.png").exists()
    md = "\n".join(monitoring_section(tmp_path, tmp_path / "report"))
    assert "median 4.0 s to evaluate, results 8.0 s after their checkpoint (median; at most 12.0 s)" in md
    assert "1 evaluation(s) ran inside the trainer" in md


def test_a_run_without_a_watcher_shows_no_watcher_section(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 5, "loss": 5.0, "tokens_per_s": 1.0}) + "\n"
                                            + json.dumps(_eval(5, 4.9)) + "\n")
    page = write_dashboard(tmp_path, tmp_path / "out").read_text()
    assert "Evaluations beside the run" not in page and "evaluated inside the trainer" in page
