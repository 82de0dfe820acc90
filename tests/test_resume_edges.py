"""What a kill, a full disk or a damaged file does to a run, and what resume makes of it (issue 19): each case
ends in one line naming the file, or in a run that carries on and says what it skipped."""
import json
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from scratchlm import cli
from scratchlm.errors import UserError
from scratchlm.ids import read_json, write_json
from scratchlm.model.best import BEST, best_checkpoint, mark_best
from scratchlm.model.checkpoint import list_checkpoints, load_model_weights, verify_checkpoint
from scratchlm.monitor.dashboard import write_dashboard
from scratchlm.monitor.monitor import read_rows
from scratchlm.stages import load_config, plan_artifacts, stage_train
from scratchlm.train import checkpoint as ckpt
from scratchlm.train import loop
from scratchlm.train.checkpoint import load_training_state, save_checkpoint
from train_procs import env, micro_run_config, prepare


@pytest.fixture(scope="module")
def prepared(builtin_corpus, micro_config, tmp_path_factory):
    """A 20-step run that checkpoints and evaluates every 10 steps, logging every step."""
    path = micro_run_config(tmp_path_factory.mktemp("edges"), builtin_corpus, micro_config, max_steps=20,
                            checkpoint_every=10, eval_every=10)
    prepare(path)
    return path


@pytest.fixture
def run(prepared):
    """(config, artifacts) of the 20-step run, its training directory removed."""
    cfg = load_config(prepared)
    art = plan_artifacts(cfg)
    shutil.rmtree(art["train"].dir, ignore_errors=True)
    return cfg, art


def _killed_after_step_20(cfg, art):
    """A finished run turned into one that died after its step-20 checkpoint, before being recorded."""
    stage_train(cfg, art)
    (art["train"].dir / "manifest.json").unlink()
    return art["train"].dir, art["train"].dir / "checkpoints"


def _rows(train_dir):
    return [json.loads(line) for line in (train_dir / "metrics.jsonl").read_text().splitlines()]


def _assert_consistent(train_dir, steps, evals, tmp_path):
    """metrics.jsonl holds each step once, in order, and the dashboard reads it."""
    rows = _rows(train_dir)
    assert [r["step"] for r in rows if "loss" in r] == list(range(1, steps + 1))
    assert [r["step"] for r in rows if "eval" in r] == evals
    assert "scratchlm run dashboard" in write_dashboard(train_dir, tmp_path).read_text()


def _tiny_model():
    torch.manual_seed(0)
    from scratchlm.config import ModelConfig
    from scratchlm.model import GPT

    return GPT(ModelConfig(n_layer=1, d_model=32, n_head=2, seq_len=16), vocab_size=40)


def _save(directory, step, model):
    return save_checkpoint(directory, step, model, torch.optim.AdamW(model.parameters()), {}, {"config": {}}, 5)


def _rewrite_checksums(path):
    meta = read_json(path / "meta.json")
    meta["checksums"] = {n: ckpt.file_digest(path / n) for n in meta["checksums"]}
    write_json(path / "meta.json", meta)


# ---- 1. damaged files ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", ["{not json", "{}"])
def test_a_damaged_meta_json_is_one_line_naming_it(tmp_path, content):
    _save(tmp_path, 1, _tiny_model())
    latest = _save(tmp_path, 2, _tiny_model())
    (latest / "meta.json").write_text(content)
    with pytest.raises(UserError, match=r"step_0000002/meta\.json is damaged.*previous checkpoint is step_0000001"):
        verify_checkpoint(latest)


def test_garbage_weights_and_state_with_matching_checksums_are_one_line_naming_the_file(tmp_path):
    model = _tiny_model()
    path = _save(tmp_path, 1, model)
    (path / "model.safetensors").write_bytes(b"not a safetensors file" * 10)
    (path / "state.pt").write_bytes(b"not a pickle")
    _rewrite_checksums(path)
    verify_checkpoint(path)  # the checksums match: only reading the bytes can tell
    with pytest.raises(UserError, match=r"model\.safetensors is not a readable safetensors file"):
        load_model_weights(model, path)
    with pytest.raises(UserError, match=r"state\.pt cannot be read"):
        load_training_state(path)


def test_a_garbage_best_json_is_logged_and_written_again(tmp_path, capsys):
    model = _tiny_model()
    _save(tmp_path, 1, model)
    (tmp_path / BEST).write_text("{garbage")
    _save(tmp_path, 2, model)  # pruning reads best.json
    assert "best.json is damaged" in capsys.readouterr().err
    assert mark_best(tmp_path, 2, 3.0) and best_checkpoint(tmp_path).name == "step_0000002"


def test_a_torn_metrics_line_is_dropped_on_resume_and_best_json_rebuilt(run, capsys, tmp_path):
    cfg, art = run
    train_dir, checkpoints = _killed_after_step_20(cfg, art)
    shutil.rmtree(checkpoints / "step_0000020")
    with open(train_dir / "metrics.jsonl", "a") as f:
        f.write('{"step": 21, "loss": 4.')  # what a kill mid-write leaves
    (checkpoints / BEST).write_text("{garbage")
    stage_train(cfg, art, resume=True)
    assert "dropped the torn last line" in capsys.readouterr().err
    _assert_consistent(train_dir, 20, [10, 20], tmp_path)
    evals = {r["step"]: r["val_loss"] for r in _rows(train_dir) if "eval" in r}
    assert read_json(checkpoints / BEST)["step"] == min(evals, key=evals.get)


def test_a_resumed_run_shows_no_verdicts_of_the_stopped_one_while_it_runs(run, monkeypatch):
    cfg, art = run
    train_dir, checkpoints = _killed_after_step_20(cfg, art)
    shutil.rmtree(checkpoints / "step_0000020")
    monkeypatch.setattr(loop, "evaluate_step", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("killed")))
    with pytest.raises(RuntimeError, match="killed"):  # the resumed run is still going at step 20
        stage_train(cfg, art, resume=True)
    assert not (train_dir / "monitor.json").exists()  # the dashboard shows "running", not the old verdicts


def test_readers_leave_out_a_torn_last_line_and_name_a_damaged_one(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 5.0}\n{"step": 2, "lo')
    assert read_rows(path) == [{"step": 1, "loss": 5.0}]  # a run being written, as the dashboard sees it
    path.write_text('{"step": 1, "loss": 5.0}\nxx\n{"step": 3, "loss": 4.0}\n')
    with pytest.raises(UserError, match=r"metrics\.jsonl is damaged: line 2"):
        read_rows(path)


# ---- 2. falling back, and choosing -------------------------------------------------------------------------

def _corrupt_weights(path):
    with open(path / "model.safetensors", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x01\x02\x03")


@pytest.mark.parametrize("damage, why", [
    (_corrupt_weights, "model.safetensors is corrupt"),
    (lambda p: (p / "meta.json").unlink(), "no meta.json"),
    (lambda p: (p / "meta.json").write_text("{}"), "meta.json is damaged"),
])
def test_resume_falls_back_to_the_newest_checkpoint_that_verifies_and_says_why(run, capsys, tmp_path, damage, why):
    cfg, art = run
    train_dir, checkpoints = _killed_after_step_20(cfg, art)
    damage(checkpoints / "step_0000020")
    stage_train(cfg, art, resume=True)
    err = capsys.readouterr().err
    assert "skipped checkpoint step_0000020" in err and why in err
    assert f"resumed from {checkpoints / 'step_0000010'} (step 10)" in err
    _assert_consistent(train_dir, 20, [10, 20], tmp_path)
    verify_checkpoint(checkpoints / "step_0000020")  # written again on the way


def test_resume_from_picks_a_checkpoint_of_this_run(run, capsys):
    cfg, art = run
    train_dir, checkpoints = _killed_after_step_20(cfg, art)
    assert cli.main(["train", "-c", str(cfg.path), "--resume-from", str(checkpoints / "step_0000010")]) == 0
    assert f"resumed from {checkpoints / 'step_0000010'} (step 10)" in capsys.readouterr().err
    assert [r["step"] for r in _rows(train_dir) if "loss" in r] == list(range(1, 21))


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_resume_from_a_corrupt_checkpoint_names_the_previous_good_one_and_the_command(run, capsys):
    cfg, art = run
    _, checkpoints = _killed_after_step_20(cfg, art)
    _corrupt_weights(checkpoints / "step_0000020")
    assert cli.main(["train", "-c", str(cfg.path), "--resume-from", str(checkpoints / "step_0000020")]) == 2
    line = _error_line(capsys.readouterr().err)
    assert "model.safetensors is corrupt" in line and "previous checkpoint is step_0000010" in line
    assert f"scratchlm train -c {cfg.path} --resume-from {checkpoints / 'step_0000010'}" in line


def _variant(cfg, name, old, new):
    path = cfg.path.with_name(f"{name}.toml")
    assert old in cfg.path.read_text()
    path.write_text(cfg.path.read_text().replace(old, new, 1))
    return load_config(path)


def test_resume_from_another_runs_checkpoint_starts_a_new_run_from_it_and_records_lineage(run, capsys):
    """The NaN fix: a lower learning rate is a new train ID; it starts from the halted run's checkpoint."""
    from scratchlm.train.schedule import lr_factor

    cfg, art = run
    source_dir, checkpoints = _killed_after_step_20(cfg, art)
    fixed = _variant(cfg, "lower_lr", "learning_rate = 0.005", "learning_rate = 0.002")
    new = plan_artifacts(fixed)["train"]
    assert new.id != art["train"].id
    source = checkpoints / "step_0000010"
    assert cli.main(["train", "-c", str(fixed.path), "--resume-from", str(source)]) == 0
    assert f"a new run started from {source} (run {art['train'].id}, step 10)" in capsys.readouterr().err
    rows = [r for r in _rows(new.dir) if "loss" in r]
    assert [r["step"] for r in rows] == list(range(11, 21))
    # step 11's loss comes before its update: the source's weights on the same batch (same seed) give the same loss
    assert rows[0]["loss"] == pytest.approx(next(r["loss"] for r in _rows(source_dir) if r["step"] == 11), rel=1e-5)
    t = fixed.train  # this config's learning rate and schedule, continued at step 10, not the checkpoint's
    for r in rows:
        factor = lr_factor(r["step"] - 1, t.max_steps, t.warmup_steps, t.schedule, t.min_lr_ratio)
        assert r["lr"] == pytest.approx(0.002 * factor)
    lineage = {"path": str(source.resolve()), "train_id": art["train"].id, "step": 10}
    assert read_json(new.dir / "checkpoints" / "step_0000020" / "meta.json")["started_from"] == lineage
    assert read_json(new.dir / "summary.json")["started_from"] == lineage


def test_resume_from_another_run_with_another_optimizer_starts_it_fresh(run, capsys):
    """Weights and step carry over; the source's AdamW moments do not fit Muon, so the optimizer starts fresh."""
    cfg, art = run
    _, checkpoints = _killed_after_step_20(cfg, art)
    muon = _variant(cfg, "muon", "[train]\n", '[train]\noptimizer = "muon"\n')
    assert muon.train.optimizer == "muon" and cfg.train.optimizer != "muon"
    new = plan_artifacts(muon)["train"]
    assert cli.main(["train", "-c", str(muon.path), "--resume-from", str(checkpoints / "step_0000010")]) == 0
    capsys.readouterr()
    assert [r["step"] for r in _rows(new.dir) if "loss" in r] == list(range(11, 21))


def test_resume_from_a_checkpoint_of_another_model_is_refused_naming_the_difference(run, capsys):
    cfg, art = run
    _, checkpoints = _killed_after_step_20(cfg, art)
    wider = _variant(cfg, "wider", "d_model = 64", "d_model = 96")
    assert cli.main(["train", "-c", str(wider.path), "--resume-from", str(checkpoints / "step_0000010")]) == 2
    line = _error_line(capsys.readouterr().err)
    assert "only with the same model" in line and "d_model 64 vs 96" in line and "n_layer" not in line


def test_stop_at_pauses_with_a_checkpoint_and_resume_finishes_the_same_schedule(run, capsys, tmp_path):
    cfg, art = run
    train_dir = art["train"].dir
    assert cli.main(["train", "-c", str(cfg.path), "--stop-at", "5"]) == 0
    err = capsys.readouterr().err
    assert "train: training paused at step 5/20 as asked (--stop-at)" in err and "error" not in err
    assert not (train_dir / "manifest.json").exists() and (train_dir / "checkpoints" / "step_0000005").is_dir()
    assert max(r["step"] for r in _rows(train_dir)) == 5
    assert cli.main(["train", "-c", str(cfg.path), "--resume"]) == 0
    _assert_consistent(train_dir, 20, [10, 20], tmp_path)
    assert cli.main(["train", "-c", str(cfg.path), "--stop-at", "20", "--force"]) == 2  # not before max_steps
    assert "--stop-at 20 must be after the step training starts from (0) and before train.max_steps (20)" in \
        _error_line(capsys.readouterr().err)


def test_run_passes_resume_from_to_training(prepared, monkeypatch):
    seen = {}
    monkeypatch.setattr("scratchlm.stages.run_all", lambda cfg, **kw: seen.update(kw))
    assert cli.main(["run", "-c", str(prepared), "--resume-from", "some/step_0000010"]) == 0
    assert seen["resume_from"] == "some/step_0000010"


# ---- 3. an evaluation lost to a kill ------------------------------------------------------------------------

def test_an_evaluation_lost_to_a_kill_runs_on_resume(run, monkeypatch, tmp_path):
    cfg, art = run
    real = loop.evaluate_step

    def killed(*a, **kw):  # the kill lands after the step-10 checkpoint, during its evaluation
        raise RuntimeError("killed")

    monkeypatch.setattr(loop, "evaluate_step", killed)
    with pytest.raises(RuntimeError, match="killed"):
        stage_train(cfg, art)
    train_dir, checkpoints = art["train"].dir, art["train"].dir / "checkpoints"
    assert [p.name for p in list_checkpoints(checkpoints)] == ["step_0000010"]
    assert not any("eval" in r for r in _rows(train_dir)) and not (checkpoints / BEST).exists()

    monkeypatch.setattr(loop, "evaluate_step", real)
    stage_train(cfg, art, resume=True)
    _assert_consistent(train_dir, 20, [10, 20], tmp_path)
    assert (train_dir / "samples" / "step_0000010.json").exists()
    assert read_json(checkpoints / BEST)["step"] in (10, 20)


# ---- 4. a full disk -----------------------------------------------------------------------------------------

def _disk_full(*a, **kw):
    raise RuntimeError("[enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file "
                       "data/0: file write failed\nunexpected pos 1088 vs 1024")


@pytest.mark.parametrize("writer", ["state", "weights"])
def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch, writer):
    model = _tiny_model()
    previous = _save(tmp_path, 1, model)
    if writer == "state":
        monkeypatch.setattr(torch, "save", _disk_full)
    else:
        monkeypatch.setattr(ckpt, "save_file", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    with pytest.raises(UserError) as e:
        _save(tmp_path, 2, model)
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / "step_0000002") in message
    assert re.search(r"[\d.,]+ [MG]iB free on its disk, about [\d.,]+ [MG]iB needed", message)
    assert "step_0000001 is untouched" in message
    assert not list(tmp_path.glob(".tmp_*")) and list_checkpoints(tmp_path) == [previous]
    verify_checkpoint(previous)



@pytest.mark.parametrize("torch_text", [
    "[enforce fail at inline_container.cc:603] . unexpected pos 123 vs 456",
    "[enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/0: file write failed",
    "[enforce fail at inline_container.cc:603] . unexpected pos 123 vs 456: No space left on device"])
def test_a_full_disk_is_worded_by_the_project_not_by_torch_internals(tmp_path, monkeypatch, torch_text):
    """torch.save's writer loses the OS error: what reaches the user is the file, the free space, what to do."""
    model = _tiny_model()
    _save(tmp_path, 1, model)

    def full(*a, **kw):
        raise RuntimeError(torch_text)

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(UserError) as e:
        _save(tmp_path, 2, model)
    message = str(e.value)
    for internal in ("enforce fail", "inline_container", "unexpected pos", "PytorchStreamWriter"):
        assert internal not in message, message
    reason = "no space left on device" if "No space" in torch_text else "the write stopped short, as on a full disk"
    assert message.startswith(f"could not write checkpoint {tmp_path / 'step_0000002'} ({reason}): "), message
    assert message.endswith("step_0000001 is untouched; free some space, then resume with --resume"), message

# ---- 5. restarts --------------------------------------------------------------------------------------------

def test_resume_before_the_first_checkpoint_starts_over_and_says_so(run, capsys, tmp_path):
    cfg, art = run
    train_dir = art["train"].dir
    (train_dir / "samples").mkdir(parents=True)  # what a run killed at step 3 leaves, checkpoint-less
    (train_dir / "samples" / "step_0000002.json").write_text("[]")
    (train_dir / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 9.0}) + "\n" for s in (1, 2, 3)))
    stage_train(cfg, art, resume=True)
    assert "no checkpoint in" in capsys.readouterr().err
    assert not (train_dir / "samples" / "step_0000002.json").exists()
    _assert_consistent(train_dir, 20, [10, 20], tmp_path)


def test_the_first_signal_asks_for_a_stop_and_the_second_stops_at_once():
    before = signal.getsignal(signal.SIGINT)
    with loop.StopOnSignal() as stop:
        signal.raise_signal(signal.SIGINT)
        assert stop.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_delivered_twice_under_a_launcher_is_one_request():
    with loop.StopOnSignal(repeat_after_s=3600) as stop:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # torchrun forwarding the Ctrl-C its process group already got
        assert stop.signum == signal.SIGINT


def _sigterm_after(path, train_dir, first_step: int, *flags: str) -> tuple[subprocess.CompletedProcess, int]:
    """Start `scratchlm train`, SIGTERM it once it has logged `first_step`; (what it printed, its last step)."""
    proc = subprocess.Popen([sys.executable, "-m", "scratchlm", "train", "-c", str(path), *flags],
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics, deadline = train_dir / "metrics.jsonl", time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and any(r.get("step", 0) >= first_step for r in read_rows(metrics)):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    last = max(r["step"] for r in read_rows(metrics))
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err), last


def test_sigterm_saves_a_checkpoint_where_it_stopped_and_resume_continues_from_it(prepared, tmp_path):
    # Checkpoints and evaluations every 1000 steps of 5000: any checkpoint on the way is the signal's.
    path = prepared.with_name("sigterm.toml")
    path.write_text(prepared.read_text().replace("max_steps = 20", "max_steps = 5000")
                    .replace("checkpoint_every = 10", "checkpoint_every = 1000")
                    .replace("eval_every = 10", "eval_every = 1000"))
    train_dir = plan_artifacts(load_config(path))["train"].dir
    shutil.rmtree(train_dir, ignore_errors=True)

    stopped, at = _sigterm_after(path, train_dir, 3)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    assert "Traceback" not in stopped.stderr and f"training stopped by SIGTERM at step {at}/5000" in stopped.stderr
    assert [p.name for p in list_checkpoints(train_dir / "checkpoints")] == [f"step_{at:07d}"]

    resumed, last = _sigterm_after(path, train_dir, at + 2, "--resume")
    assert resumed.returncode == 128 + signal.SIGTERM, resumed.stderr
    assert f"resumed from {train_dir / 'checkpoints' / f'step_{at:07d}'} (step {at})" in resumed.stderr
    assert [r["step"] for r in read_rows(train_dir / "metrics.jsonl")] == list(range(1, last + 1))
    assert "scratchlm run dashboard" in write_dashboard(train_dir, tmp_path).read_text()


def _final_weights(train_dir):
    from safetensors.torch import load_file

    return load_file(str(train_dir / "checkpoints" / "step_0000020" / "model.safetensors"))


def test_a_resume_trains_in_the_precision_its_run_recorded(run, monkeypatch):
    """The first process of a run decides bf16; the resumed one would decide fp32 on this machine now (it was
    busy, its limits changed) and takes the recorded bf16 instead: bit-identical to the run that never stopped."""
    from scratchlm.model import device as dev

    cfg, art = run
    train_dir = art["train"].dir
    monkeypatch.setattr(dev, "cpu_precision", lambda: ("bf16", "forced bf16 for the test"))
    assert cli.main(["train", "-c", str(cfg.path)]) == 0
    whole = _final_weights(train_dir)
    shutil.rmtree(train_dir)
    assert cli.main(["train", "-c", str(cfg.path), "--stop-at", "5"]) == 0
    monkeypatch.setattr(dev, "cpu_precision", lambda: ("fp32", "forced fp32 for the test"))
    assert cli.main(["train", "-c", str(cfg.path), "--resume"]) == 0
    resumed = _final_weights(train_dir)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    summary = read_json(train_dir / "summary.json")
    assert summary["precision"] == "bf16" and "recorded by the run (forced bf16" in summary["precision_reason"]
    assert read_json(train_dir / "checkpoints" / "step_0000020" / "meta.json")["precision"] == "bf16"
