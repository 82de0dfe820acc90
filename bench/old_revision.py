"""This repository's code as it was at a git revision: one module imported beside the work tree's own, so a bench
can run the old and the new code side by side in one process, or the whole `src` folder, to run in a
subprocess."""
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


def src_at(rev: str, root: Path) -> tuple[Path, str]:
    """(the `src` folder of `rev`, unpacked by `git archive` under root/src-<rev> once, and rev's short name).
    A run from it cannot see what is being edited in the work tree meanwhile."""
    short = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], capture_output=True, text=True,
                           check=True).stdout.strip()
    dest = Path(root) / f"src-{short}"
    if not (dest / "src" / "scratchlm").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", short, "src"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src", short
