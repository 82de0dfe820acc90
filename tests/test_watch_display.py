"""How the dashboard and the report show an eval watcher's evaluations (issue 21): rows appended out of step
order draw in step order, each evaluation says where it came from, and one summary feeds both."""
import json

import matplotlib.pyplot as plt

from scratchlm.monitor.charts import wait_chart
from scratchlm.monitor.dashboard import write_dashboard
from scratchlm.monitor.report import monitoring_section
from scratchlm.monitor.watch_rows import in_step_order, watch_summary
from scratchlm.report.build import _metrics


def _eval(step, loss, watch=None):
    row = {"step": step, "eval": {"web": {"loss": loss, "bpb": loss / 2, "top1": 0.1, "top10": 0.3}},
           "val_loss": loss, "repetition": [0.0]}
    if watch is not None:
        row["watch"] = {"device": "cpu", "suite": "fast", "checkpoint": f"step_{step:07d}", "checkpoint_id": "x",
                        "saved_at": 100.0, "done_at": 100.0 + watch, "latency_s": watch, "eval_s": watch / 2,
                        "shared": True}
    return row


def _run(tmp_path):
    """Training rows to step 40; the inline evaluation of step 10; the watcher's of 40 and 20, appended late and
    out of order (a watcher catching up newest first), then a torn line."""
    train = [{"step": s, "loss": 5.0 - s / 100, "lr": 1e-3, "tokens_per_s": 1000.0, "data_wait_share": 0.01,
              **({"watch_share": 0.75} if s >= 20 else {})} for s in range(5, 45, 5)]
    rows = train[:2] + [_eval(10, 4.9)] + train[2:] + [_eval(40, 4.5, watch=4.0), _eval(20, 4.7, watch=12.0)]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 45, "lo'  # a watcher mid-write: a torn line
    (tmp_path / "metrics.jsonl").write_text(text)
    return rows


def test_summary_counts_the_watchers_rows_only(tmp_path):
    rows = _run(tmp_path)
    summary = watch_summary(rows)
    assert summary == {"evaluations": 2, "inline": 1, "devices": ["cpu"], "shared": 2, "median_latency_s": 8.0,
                       "max_latency_s": 12.0, "median_eval_s": 4.0}
    assert watch_summary([r for r in rows if "watch" not in r]) is None
    ordered = in_step_order(rows)
    assert [r["step"] for r in ordered] == sorted(r["step"] for r in rows)
    at_20 = [r for r in ordered if r["step"] == 20]
    assert "loss" in at_20[0] and "watch" in at_20[1]  # stable: the step's log row stays first


def test_report_reads_rows_in_step_order_past_a_torn_line(tmp_path):
    rows = _run(tmp_path)
    read = _metrics(tmp_path)
    assert len(read) == len(rows)  # the torn last line is left out, nothing else
    assert [r["step"] for r in read] == sorted(r["step"] for r in rows)
    assert [r["step"] for r in read if "eval" in r] == [10, 20, 40]


def test_wait_chart_shows_the_watcher_only_when_it_competed():
    train = [{"step": s, "loss": 5.0, "data_wait_share": 0.1, **({"watch_share": 0.5} if s > 1 else {})}
             for s in range(4)]
    for rows, labels in ((train, ["waiting for data", "eval watcher evaluating on a shared device"]),
                         ([{k: v for k, v in r.items() if k != "watch_share"} for r in train], ["waiting for data"])):
        fig, ax = plt.subplots()
        wait_chart(rows, [], [], ax)
        assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
        plt.close(fig)


def test_dashboard_and_report_show_where_each_evaluation_came_from(tmp_path):
    _run(tmp_path)
    page = write_dashboard(tmp_path, tmp_path / "out").read_text()
    assert "Step 40, mean validation loss 4.5; evaluated by the eval watcher on cpu, result 4.0 s after" in page
    assert "<h2>Evaluations beside the run</h2>" in page
    assert "2 evaluation(s) came from the eval watcher on cpu (2 of them on a device or CPU cores shared" in page
    row_20 = "<td>20</td><td>step_0000020</td><td>cpu</td><td>fast</td><td>yes</td><td>6</td><td>12</td>"
    row_40 = "<td>40</td><td>step_0000040</td><td>cpu</td><td>fast</td><td>yes</td><td>2</td><td>4</td>"
    assert row_20 in page and row_40 in page and page.index(row_20) < page.index(row_40)  # in step order
    assert (tmp_path / "out" / "plots" / "data_wait.png").exists()
    md = "\n".join(monitoring_section(tmp_path, tmp_path / "report"))
    assert "median 4.0 s to evaluate, results 8.0 s after their checkpoint (median; at most 12.0 s)" in md
    assert "1 evaluation(s) ran inside the trainer" in md


def test_a_run_without_a_watcher_shows_no_watcher_section(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 5, "loss": 5.0, "tokens_per_s": 1.0}) + "\n"
                                            + json.dumps(_eval(5, 4.9)) + "\n")
    page = write_dashboard(tmp_path, tmp_path / "out").read_text()
    assert "Evaluations beside the run" not in page and "evaluated inside the trainer" in page
