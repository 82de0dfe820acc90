"""A stage is up to date only when its files are there and whole (issue 38): a truncated shard, a deleted
shards.json, a garbled tokenizer.json or a lost training manifest is one line naming the file and the command
that rebuilds it, never "up to date" and then a traceback, never a silent retraining."""
import json
import shutil

import pytest

from scratchlm import cli
from scratchlm.stages import load_config, plan_artifacts, stage_train
from train_procs import micro_run_config, prepare


@pytest.fixture(scope="module")
def finished(builtin_corpus, micro_config, tmp_path_factory):
    """The folder of a config whose every stage up to training has run (10 steps)."""
    path = micro_run_config(tmp_path_factory.mktemp("whole"), builtin_corpus, micro_config, max_steps=10,
                            checkpoint_every=10, eval_every=10)
    cfg, _ = prepare(path)
    stage_train(cfg, plan_artifacts(cfg))
    return path


@pytest.fixture
def copy(finished, tmp_path):
    """(config path, artifacts) of a copy of the finished run, to damage."""
    shutil.copytree(finished.parent, tmp_path / "w")
    path = tmp_path / "w" / finished.name
    return path, plan_artifacts(load_config(path))


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_truncated_shard_is_named_with_the_command_that_rebuilds_it(copy, capsys):
    path, art = copy
    shard = next((art["shards"].dir / "train").glob("*.bin"))
    with open(shard, "r+b") as f:
        f.truncate(1000)
    assert cli.main(["run", "-c", str(path)]) == 2
    line = _error_line(capsys)
    assert str(shard) in line and "1,000 bytes where the stage wrote" in line
    assert "`scratchlm tokenizer encode -c CONFIG --force`" in line and "up to date" not in line
    assert cli.main(["tokenizer", "encode", "-c", str(path), "--force"]) == 0
    assert art["shards"].damage(deep=True) is None


def test_a_truncated_validation_shard_stops_the_evaluation(copy, capsys):
    path, art = copy
    val = next((art["shards"].dir / "val").glob("*.bin"))
    val.write_bytes(val.read_bytes()[:1000])
    assert cli.main(["eval", "-c", str(path)]) == 2
    assert str(val) in _error_line(capsys)


def test_a_deleted_shards_json_is_named(copy, capsys):
    path, art = copy
    (art["shards"].dir / "shards.json").unlink()
    assert cli.main(["train", "-c", str(path)]) == 2
    assert f"{art['shards'].dir / 'shards.json'} is missing" in _error_line(capsys)


def test_a_tokenizer_garbled_in_place_is_named_by_the_next_stage(copy, capsys):
    path, art = copy
    tok = art["tokenizer"].dir / "tokenizer.json"
    text = tok.read_text()
    tok.write_text(text.replace('"', "'", 1))  # the same size: only the hash can tell
    assert cli.main(["tokenizer", "encode", "-c", str(path)]) == 2
    assert f"{tok} was changed after the stage wrote it" in _error_line(capsys)


def test_a_damaged_manifest_is_one_line(copy, capsys):
    path, art = copy
    (art["tokenizer"].dir / "manifest.json").write_text("{garbled")
    assert cli.main(["run", "-c", str(path)]) == 2
    assert "manifest.json is not valid JSON" in _error_line(capsys)


def test_the_quick_check_reads_sizes_and_the_deep_one_every_byte(copy):
    _, art = copy
    shard = next((art["shards"].dir / "train").glob("*.bin"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert art["shards"].damage() is None  # the size is right
    assert "was changed after the stage wrote it" in art["shards"].damage(deep=True)


def test_a_manifest_from_before_the_file_list_gets_one_on_the_next_run(copy, capsys):
    path, art = copy
    for stage in ("shards", "train"):
        manifest = art[stage].dir / "manifest.json"
        old = json.loads(manifest.read_text())
        del old["files"]
        manifest.write_text(json.dumps(old))
        assert art[stage].damage(deep=True) is None  # nothing recorded, nothing to compare
    assert cli.main(["train", "-c", str(path)]) == 0
    assert "train: its manifest predates file lists; " in capsys.readouterr().err
    assert "checkpoints/step_0000010/state.pt" in art["train"].manifest()["files"]
    (art["shards"].dir / "shards.json").unlink()
    assert cli.main(["tokenizer", "encode", "-c", str(path)]) == 2  # recorded by `train`, which read the shards
    assert "shards.json is missing" in _error_line(capsys)


def test_a_finished_training_that_lost_its_manifest_is_not_trained_again(copy, capsys):
    path, art = copy
    train = art["train"].dir
    rows = (train / "metrics.jsonl").read_text()
    (train / "manifest.json").unlink()
    assert cli.main(["run", "-c", str(path)]) == 2
    line = _error_line(capsys)
    assert "a finished training whose manifest.json is missing, with checkpoints up to step_0000010" in line
    assert "--resume" in line and "--force" in line
    assert (train / "checkpoints" / "step_0000010").is_dir()  # nothing was deleted
    assert cli.main(["train", "-c", str(path), "--resume"]) == 0
    assert (train / "manifest.json").exists() and (train / "metrics.jsonl").read_text().count('"loss"') == \
        rows.count('"loss"')  # no step trained again
    assert art["train"].damage(deep=True) is None


def test_the_train_record_skips_logs_and_earlier_checkpoints(copy):
    _, art = copy
    files = json.loads((art["train"].dir / "manifest.json").read_text())["files"]
    assert "summary.json" in files and "checkpoints/step_0000010/model.safetensors" in files
    assert "metrics.jsonl" not in files  # the eval watcher appends to it after the manifest


def test_check_hashes_every_byte_of_every_stage(copy, capsys):
    path, art = copy
    from scratchlm.plan.check import artifacts_verdict

    whole = artifacts_verdict(art)
    assert whole.level == "ok" and "files of 5 stages hashed and whole" in whole.summary
    shard = next((art["shards"].dir / "val").glob("*.bin"))
    data = bytearray(shard.read_bytes())
    data[0] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert cli.main(["check", "-c", str(path), "--skip-resume"]) == 2  # the quick check before `run` misses it
    line = _error_line(capsys)
    assert f"{shard} was changed after the stage wrote it" in line and "tokenizer encode -c CONFIG --force" in line
