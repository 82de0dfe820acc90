"""User mistakes end in one line on stderr and exit code 2, never a traceback."""
import subprocess
import sys


def scratchlm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "scratchlm", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _one_line_error(r, *needles):
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0]


def test_missing_config(tmp_path):
    _one_line_error(scratchlm("run", "-c", str(tmp_path / "nope.toml")), "nope.toml", "not found")


def test_typo_in_config(tmp_path):
    (tmp_path / "c.toml").write_text('[[data.sources]]\nname="a"\ndomain="w"\npath="x"\n[train]\nlerning_rate=1\n')
    _one_line_error(scratchlm("run", "-c", str(tmp_path / "c.toml")), "c.toml", "lerning_rate", "learning_rate")


def test_source_matching_nothing(tmp_path):
    (tmp_path / "c.toml").write_text('[[data.sources]]\nname="forum"\ndomain="w"\npath="nothing/*.jsonl"\n')
    _one_line_error(scratchlm("data", "prepare", "-c", str(tmp_path / "c.toml")), "source `forum`")


def test_stage_before_its_input(tmp_path):
    (tmp_path / "a.txt").write_text("hello " * 100)
    (tmp_path / "c.toml").write_text('[[data.sources]]\nname="a"\ndomain="w"\npath="a.txt"\n')
    _one_line_error(scratchlm("train", "-c", str(tmp_path / "c.toml")), "scratchlm data prepare")


def test_init_writes_a_loadable_config(tmp_path):
    r = scratchlm("init", str(tmp_path / "proj"))
    assert r.returncode == 0 and (tmp_path / "proj" / "scratchlm.toml").exists()
    _one_line_error(scratchlm("init", str(tmp_path / "proj")), "already exists")


def test_generate_from_missing_checkpoint(tmp_path):
    _one_line_error(scratchlm("generate", "--checkpoint", str(tmp_path)), "not a scratchlm checkpoint")
