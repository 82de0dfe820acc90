"""The `scratchlm compare` page renders in headless Chromium: every plot decodes and is drawn, the console stays
clean, nothing is loaded from the network. The browser helpers are the dashboard test's (test_dashboard_browser).

Needs Debian's `chromium` (apt-get install -y chromium); skipped with that reason when it is absent.
"""
import base64
import io
import re

import matplotlib.image
import pytest
from test_dashboard_browser import CHROMIUM, _blank_charts, _render
from test_experiments_compare import _config, synthetic_run

from scratchlm.cli import main

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless browser test needs Debian's chromium: "
                                                          "apt-get update && apt-get install -y chromium")
CHARTS = {"chart-val_loss_tokens", "chart-val_loss_seconds", "chart-train_loss", "chart-bpb", "chart-topk"}


def _decoded_blank(png: bytes) -> bool:
    """A PNG with no coloured pixel: only the white background, grey axes and text."""
    pixels = matplotlib.image.imread(io.BytesIO(png))[..., :3]
    return ((pixels.max(axis=-1) - pixels.min(axis=-1)) > 0.25).mean() < 0.001


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    synthetic_run(d / "a", steps=300, tokens_per_s=1000, loss_per_mtoken=2.0)
    synthetic_run(d / "b", _config(train__optimizer="muon", train__learning_rate=1e-3, train__eval_every=70), steps=400, eval_every=70,
                  tokens_per_s=3000, loss_per_mtoken=1.0)
    out = d / "out" / "compare.html"
    assert main(["compare", str(d / "a"), str(d / "b"), "--html", str(out)]) == 0
    return out


def test_compare_page_draws_every_plot_without_console_errors(page, tmp_path):
    text = page.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", text), "the page must not load anything remote"
    assert "<script" not in text
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) == len(CHARTS)
    assert [_decoded_blank(base64.b64decode(i)) for i in images] == [False] * len(CHARTS)
    pixels, console, charts = _render(tmp_path, page)
    assert {c[0] for c in charts} == CHARTS
    assert _blank_charts(pixels, charts) == []
    assert console == []
    assert "confounded: 2 things changed (train.optimizer, train.learning_rate)" in text
    assert '<p class="verdict confounded">' in text and "no common evaluation step" in text


def test_a_blank_plot_is_caught():
    """Control for the decoded-image check above."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    ax.set_title("axes only")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    assert _decoded_blank(buf.getvalue())
