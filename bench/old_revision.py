"""A module of this repository as it was at an older git revision, imported beside the work tree's own, so a
bench can run the old and the new code side by side in one process."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def module_at(rev: str, path: str, name: str, source_file: str | None = None):
    """`path` (relative to the repository root) at `rev` (or the file `source_file`), imported as `name`: a name
    inside the package it came from ("scratchlm.data.split_step_old") resolves its relative imports there, so it
    runs against the work tree's other modules."""
    code = Path(source_file).read_text() if source_file else subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout
    file = Path(tempfile.mkdtemp()) / f"{name.rsplit('.', 1)[-1]}.py"
    file.write_text(code)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
