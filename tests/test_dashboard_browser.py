"""The HTML dashboard renders in headless Chromium: every chart is drawn, the console stays clean, no network.

Needs Debian's `chromium` (apt-get install -y chromium); skipped with that reason when it is absent.
"""
import html
import json
import math
import re
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest

from scratchlm.monitor.dashboard import write_dashboard

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless browser test needs Debian's chromium: "
                                                          "apt-get update && apt-get install -y chromium")
DOMAINS = ("code", "docs", "web")
WIDTH = 1600


def _synthetic_run(train_dir):
    """A training directory as the monitor writes it, with every chart's inputs and two alerts."""
    rows = []
    for step in range(10, 310, 10):
        groups = {g: 1.0 + i + step / 300 for i, g in enumerate(("embedding", "block0", "block1", "final_norm"))}
        rows.append({"step": step, "loss": 2 + 4 * math.exp(-step / 80), "lr": 1e-3, "grad_norm": 0.5,
                     "tokens_per_s": 4000 + step, "tokens": step * 1024, "grad_norm_groups": groups,
                     "weight_norm": {g: 10 * v for g, v in groups.items()},
                     "update_ratio": {g: 1e-3 / v for g, v in groups.items()}, "mfu": 0.3,
                     "data_wait_share": 0.02, "memory_kind": "rss", "memory_bytes": 5e8})
        if step % 100 == 0:
            rows.append({"step": step, "val_loss": 3.0, "eval": {
                d: {"loss": 3 + i - step / 300, "bpb": 1.5 - step / 1000, "top1": 0.2 + step / 1000,
                    "top10": 0.5 + step / 1000, "tokens": 2048, "logit_max": 9.0, "logit_max_mean": 5 + step / 100,
                    "logit_std": 2.0, "entropy": 3 - step / 300} for i, d in enumerate(DOMAINS)}})
    (train_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    alerts = [{"step": 120, "detector": "loss_spike", "subject": "loss", "verdict": "warning", "message": "spike"},
              {"step": 200, "detector": "domain_degradation", "subject": "web", "verdict": "warning",
               "message": "validation loss of domain `web` rose"}]
    (train_dir / "alerts.jsonl").write_text("".join(json.dumps(a) + "\n" for a in alerts))
    (train_dir / "samples").mkdir()
    for step, text in ((100, "def add(a, b):\n    return a"), (200, "def add(a, b):\n    return a + b")):
        (train_dir / "samples" / f"step_{step:07d}.json").write_text(
            json.dumps([{"prompt": "def add(", "completion": text}]))


def _chromium(tmp_path, url, *args):
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--force-device-scale-factor=1", f"--user-data-dir={profile}", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _chart_boxes(tmp_path, page):
    """Layout of each chart, read back from the DOM by a probe script added to a copy of the page."""
    probe = page.with_name("probe.html")
    script = ("<script>document.body.setAttribute('data-boxes', JSON.stringify({height: "
              "document.documentElement.scrollHeight, charts: [...document.querySelectorAll('figure.chart')]"
              ".map(f => {const r = f.getBoundingClientRect(); return [f.id, r.x, r.y, r.width, r.height];})}));"
              "</script>")
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    r = _chromium(tmp_path, probe.as_uri(), f"--window-size={WIDTH},1000", "--dump-dom")
    found = re.search(r"data-boxes=\"([^\"]*)\"", r.stdout)
    assert found, r.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _render(tmp_path, page):
    """(screenshot pixels, console messages, chart boxes) of the page as Chromium draws it."""
    boxes = _chart_boxes(tmp_path, page)
    shot = tmp_path / f"{page.stem}.png"
    r = _chromium(tmp_path, page.as_uri(), f"--window-size={WIDTH},{boxes['height']}", f"--screenshot={shot}",
                  "--enable-logging=stderr", "--v=0")
    assert shot.exists(), r.stderr[-2000:]
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return matplotlib.image.imread(shot)[..., :3], console, boxes["charts"]


def _blank_charts(pixels, charts) -> list[str]:
    """Charts whose area holds no coloured pixel: axes and text are grey, the curves are not."""
    blank = []
    for name, x, y, w, h in charts:
        crop = pixels[int(y):int(y + h), int(x):int(x + w)]
        saturation = crop.max(axis=-1) - crop.min(axis=-1)
        if crop.size == 0 or (saturation > 0.25).mean() < 0.001:
            blank.append(name)
    return blank


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    d = tmp_path_factory.mktemp("dash")
    (d / "train").mkdir()
    _synthetic_run(d / "train")
    return write_dashboard(d / "train", d / "out")


def test_dashboard_draws_every_chart_without_console_errors(dashboard, tmp_path):
    text = dashboard.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", text), "the dashboard must not load anything remote"
    assert "<script" not in text
    pixels, console, charts = _render(tmp_path, dashboard)
    names = {c[0] for c in charts}
    assert {"chart-loss", "chart-topk", "chart-grad_norm", "chart-weight_norm", "chart-logits",
            "chart-timeline"} <= names
    assert _blank_charts(pixels, charts) == []
    assert console == []
    assert "domain_degradation" in text and "diff_add" in text  # alert timeline and sample diff are there


def test_the_browser_checks_can_fail(dashboard, tmp_path):
    """Controls: a blank chart and a script error are caught, so the test above would see them."""
    import io

    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(7.5, 3.6), dpi=100)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    import base64

    white = base64.b64encode(buf.getvalue()).decode()
    text = dashboard.read_text()
    first_img = re.search(r'id="chart-loss"><img alt="loss" src="data:image/png;base64,([^"]+)"', text)
    broken = tmp_path / "broken.html"
    broken.write_text(text.replace(first_img.group(1), white)
                      .replace("</body>", "<script>undefined_function()</script></body>"))
    pixels, console, charts = _render(tmp_path, broken)
    assert _blank_charts(pixels, charts) == ["chart-loss"]
    assert any("undefined_function" in line for line in console)
    assert np.asarray(pixels).shape[1] == WIDTH
