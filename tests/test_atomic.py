"""Atomic writes: the target holds the old content or the new, and no temp is left behind, even on failure."""
import os

import pytest

from scratchlm.atomic import atomic_write_text, replacing_dir, replacing_file, temp_name


def test_a_file_is_replaced_whole_and_its_temp_is_gone(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["a.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with replacing_file(path) as tmp:
            tmp.write_text("half of it")
            raise RuntimeError("disk full")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.json"]


def test_the_temp_is_hidden_beside_the_target_and_named_for_this_process(tmp_path):
    assert temp_name(tmp_path / "keys.npy", ".npy") == tmp_path / f".keys.npy.tmp{os.getpid()}.npy"


def test_a_directory_is_replaced_whole_and_a_failed_one_leaves_the_old(tmp_path):
    out = tmp_path / "unit"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with replacing_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
    assert os.listdir(out) == ["new.txt"]
    with pytest.raises(OSError):
        with replacing_dir(out) as tmp:
            (tmp / "half.txt").write_text("half")
            raise OSError("disk full")
    assert os.listdir(out) == ["new.txt"] and os.listdir(tmp_path) == ["unit"]


def test_a_fixed_temp_name_is_cleared_of_a_crashed_writers_leftover(tmp_path):
    leftover = tmp_path / ".tmp_step_0000010"
    leftover.mkdir()
    (leftover / "model.safetensors").write_text("half")
    with replacing_dir(tmp_path / "step_0000010", tmp=leftover) as tmp:
        assert os.listdir(tmp) == []
        (tmp / "meta.json").write_text("{}")
    assert sorted(os.listdir(tmp_path)) == ["step_0000010"]
