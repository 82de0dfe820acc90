"""One source of the sampling defaults (scratchlm/sampling.py): `chat` and `generate` show theirs in --help, and an
export carries the same ones as its generation config, so the exported model answers like the command."""
import dataclasses
import json
import re
from pathlib import Path

import pytest

from scratchlm.cli import build_parser
from scratchlm.sampling import CHAT, GENERATE, Sampling
from ship_fixtures import make_checkpoint

FLAGS = {"max_new_tokens": "--max-new-tokens", "temperature": "--temperature", "top_k": "--top-k",
         "top_p": "--top-p", "repetition_penalty": "--repetition-penalty"}


def _parser_defaults(command: str) -> Sampling:
    args = build_parser().parse_args([command, "--checkpoint", "X"])
    return Sampling(**{key: getattr(args, key) for key in FLAGS})


@pytest.mark.parametrize("command, defaults", [("chat", CHAT), ("generate", GENERATE)])
def test_the_commands_defaults_are_the_one_source_and_help_shows_them(capsys, command, defaults):
    assert _parser_defaults(command) == defaults
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    options = " ".join(capsys.readouterr().out.split()).split("options:", 1)[1]  # argparse wraps lines
    for key, flag in FLAGS.items():
        beside = re.search(rf"{flag} [A-Z_]+ (.*?)(?= --|$)", options).group(1)  # the flag's own help
        assert f"(default: {getattr(defaults, key)})" in beside, (flag, beside)


def _sft_meta(monkeypatch, module):
    """The exporter sees a fine-tuned checkpoint: its meta names the fine-tuning, as sft/train.py writes it."""
    load = module.load_model

    def load_tuned(*args, **kwargs):
        model, tok, meta = load(*args, **kwargs)
        return model, tok, {**meta, "sft": {"data": "pairs.jsonl"}}
    monkeypatch.setattr(module, "load_model", load_tuned)


@pytest.mark.parametrize("tuned", [False, True], ids=["base", "fine-tuned"])
def test_the_hf_export_carries_the_commands_sampling(tmp_path, monkeypatch, tuned):
    from scratchlm.export import hf

    if tuned:
        _sft_meta(monkeypatch, hf)
    out = hf.export_hf(make_checkpoint(tmp_path / "ck"), tmp_path / "hf")
    config = json.loads((out / "generation_config.json").read_text())
    command = "chat" if tuned else "generate"
    ours = _parser_defaults(command)
    assert {key: config[key] for key in FLAGS} == dataclasses.asdict(ours) and config["do_sample"] is True
    transformers = pytest.importorskip("transformers")
    loaded = transformers.GenerationConfig.from_pretrained(str(out))
    assert (loaded.repetition_penalty, loaded.temperature, loaded.top_p) == (
        ours.repetition_penalty, ours.temperature, ours.top_p)


def test_the_gguf_export_carries_the_chat_sampling_of_a_fine_tuned_checkpoint(tmp_path, monkeypatch):
    gguf = pytest.importorskip("gguf")
    from scratchlm.export import gguf_export

    _sft_meta(monkeypatch, gguf_export)
    path = gguf_export.export_gguf(make_checkpoint(tmp_path / "ck"), tmp_path / "gguf", "f16")
    fields = gguf.GGUFReader(str(path)).fields
    value = lambda key: fields[key].parts[-1][0].item()  # noqa: E731
    assert value("general.sampling.temp") == pytest.approx(CHAT.temperature)
    assert value("general.sampling.top_k") == CHAT.top_k
    assert value("general.sampling.top_p") == pytest.approx(CHAT.top_p)
    assert value("general.sampling.penalty_repeat") == pytest.approx(CHAT.repetition_penalty)


def test_the_docs_table_of_sampling_defaults_is_sampling_py():
    page = (Path(__file__).resolve().parents[1] / "docs" / "eval-sft-export.md").read_text(encoding="utf-8")
    for command, d in (("`generate`", GENERATE), ("`chat`", CHAT)):
        row = next(line for line in page.splitlines() if line.startswith(f"| {command}"))
        cells = [c.strip().split()[0] for c in row.strip("|").split("|")[1:]]
        assert [float(c) for c in cells] == [d.max_new_tokens, d.temperature, d.top_k, d.top_p,
                                             d.repetition_penalty], row
