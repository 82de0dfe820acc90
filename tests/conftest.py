import os
from pathlib import Path

import pytest

from scratchlm.data.builtin import build_builtin_corpus

os.environ.setdefault("SCRATCHLM_PROGRESS", "0")

# The micro corpus (~160K tokens) is far too small for even this model: a demo, like the quickstart.
MICRO = """
[run]
workdir = "run"
demo = true
[data]
min_chars = 100
val_fraction = 0.1
val_max_docs = 8
[tokenizer]
vocab_size = 512
sample_chars = 400000
[model]
n_layer = 2
d_model = 64
n_head = 4
seq_len = 64
[train]
max_steps = {steps}
batch_size = 16
learning_rate = 0.005
warmup_steps = 5
checkpoint_every = {ckpt}
eval_every = {ckpt}
log_every = 5
threads = 2
compile = false  # auto would torch.compile in every plan's probe: tens of seconds
[eval]
max_batches = 2
max_new_tokens = 8
"""


def pytest_report_header(config) -> str:
    """The numerics a run's figures depend on, printed at the top of every test log (CI's too)."""
    import torch

    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = "CPU model unknown"
    return (f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
            f"{os.cpu_count()} CPUs ({model}), {torch.get_num_threads()} threads")


@pytest.fixture(scope="session")
def builtin_corpus(tmp_path_factory) -> dict[str, Path]:
    return build_builtin_corpus(tmp_path_factory.mktemp("corpus"), code_max_chars=300_000)


@pytest.fixture(scope="session")
def core_corpus(tmp_path_factory) -> dict[str, Path]:
    """The built-in corpus with the descriptions of only the packages scratchlm requires, but not those only the
    optional Ray extra installs, for the tests whose outcome depends on the data: installing Ray (or any other
    package) would change the web domain, and with it a 300-step run. Nor scratchlm's own: an editable install
    keeps the README of the day it was installed, CI's clean clone today's."""
    return build_builtin_corpus(tmp_path_factory.mktemp("core_corpus"), code_max_chars=300_000,
                                web_skip=_installed() - (_closure(["scratchlm"], skip={"ray"}) - {"scratchlm"}))


def _installed() -> set[str]:
    """Every installed distribution's name (lower-case, in both spellings). The core corpus reads only those
    scratchlm requires: a tool installed beside it (a linter, pip's own version) would change the web domain here
    and not on CI, and with it every batch of a run whose outcome a test pins."""
    import importlib.metadata as metadata

    names = {(d.metadata.get("Name") or "").lower() for d in metadata.distributions()}
    return {v for n in names if n for v in _spellings(n)}


def _spellings(name: str) -> set[str]:
    """A distribution's name as pip and its metadata may write it."""
    return {name, name.replace("_", "-"), name.replace("-", "_")}


def _closure(roots: list[str], skip: set[str] = frozenset()) -> set[str]:
    """The distributions `roots` require, recursively, with every extra of scratchlm's but those in `skip`
    (names lower-case, in both spellings)."""
    import importlib.metadata as metadata
    import re

    def names(dist: str) -> list[str]:
        try:
            requires = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            return []
        return [re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requires
                if "extra ==" not in r or dist == "scratchlm"]

    found, todo = set(roots), list(roots)
    while todo:
        for name in names(todo.pop()):
            for variant in _spellings(name) - skip:
                if variant not in found:
                    found.add(variant)
                    todo.append(variant)
    return found


def write_micro_config(directory: Path, corpus: dict[str, Path], steps: int = 80, ckpt: int = 40,
                       extra: str = "") -> Path:
    sources = "".join(
        f'\n[[data.sources]]\nname = "{d}"\ndomain = "{d}"\npath = "{p}"\n' for d, p in corpus.items())
    path = directory / "scratchlm.toml"
    path.write_text(MICRO.format(steps=steps, ckpt=ckpt) + extra + sources)
    return path


@pytest.fixture(scope="session")
def micro_config():
    return write_micro_config
