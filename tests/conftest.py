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


@pytest.fixture(scope="session")
def builtin_corpus(tmp_path_factory) -> dict[str, Path]:
    return build_builtin_corpus(tmp_path_factory.mktemp("corpus"), code_max_chars=300_000)


@pytest.fixture(scope="session")
def core_corpus(tmp_path_factory) -> dict[str, Path]:
    """The built-in corpus without the descriptions of the packages only the optional Ray extra installs, for the
    tests whose outcome depends on the data: installing Ray changes the web domain, and with it a 300-step run."""
    return build_builtin_corpus(tmp_path_factory.mktemp("core_corpus"), code_max_chars=300_000,
                                web_skip=_closure(["ray"]) - _closure(["scratchlm"], skip={"ray"}))


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
            for variant in {name, name.replace("_", "-"), name.replace("-", "_")} - skip:
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
