"""The executors (executor.py): a local process pool and Ray give the same data and shards, byte for byte."""
import os
import shutil
from pathlib import Path

import pytest

from scratchlm.errors import UserError
from scratchlm.executor import LocalExecutor, in_worker
from scratchlm.stages import load_config, plan_artifacts, stage_training_inputs


def _square(x: int) -> int:
    return x * x


def _pid_and_worker(_: int) -> tuple[int, bool]:
    return os.getpid(), in_worker()


def _refuse(x: int) -> int:
    if x == 3:
        raise UserError(f"in.jsonl:{x}: not a JSON object")
    return x


def test_local_executor_yields_in_order_with_a_bounded_window():
    submitted = []

    def tasks():
        for i in range(40):
            submitted.append(i)
            yield i

    ex = LocalExecutor(2)
    try:
        results = ex.imap(_square, tasks(), window=3)
        assert next(results) == 0
        assert len(submitted) <= 3  # the driver pulled no more tasks than the window
        assert [0, *results] == [i * i for i in range(40)]
        pids = set(ex.imap(_pid_and_worker, range(8)))
        assert all(worker and pid != os.getpid() for pid, worker in pids)
    finally:
        ex.close()


def test_one_worker_or_one_task_runs_here_without_a_pool():
    ex = LocalExecutor(2)
    assert list(ex.imap(_pid_and_worker, [0])) == [(os.getpid(), False)]
    assert ex._pool is None
    assert list(LocalExecutor(1).imap(_square, range(5))) == [0, 1, 4, 9, 16]


def test_a_task_error_reaches_the_driver_as_itself():
    ex = LocalExecutor(2)
    try:
        with pytest.raises(UserError, match="in.jsonl:3"):
            list(ex.imap(_refuse, range(6)))
    finally:
        ex.close()


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    # workers import this module's task functions by name, like any pickled function
    here = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": here}})
    yield ray
    ray.shutdown()


def test_ray_task_errors_stay_user_errors(ray_local):
    from scratchlm.executor import RayExecutor

    ex = RayExecutor()
    assert ex.workers == 2
    assert list(ex.imap(_square, range(7), window=2)) == [i * i for i in range(7)]
    with pytest.raises(UserError, match="in.jsonl:3: not a JSON object"):
        list(ex.imap(_refuse, range(6)))


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


TIMES = ("seconds", "created", "peak_mib")  # what a stage measures of its own run: differs between any two runs


def _comparable(name: str, data: bytes):
    if not name.endswith(".json"):
        return data
    import json

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMES}
        return [strip(v) for v in x] if isinstance(x, list) else x
    parsed = json.loads(data)
    if name == "manifest.json":  # its file list hashes files that hold times (stats.json); each is compared itself
        parsed.pop("files", None)
    return strip(parsed)


def test_ray_gives_the_local_executors_data_and_shards_byte_for_byte(ray_local, builtin_corpus, micro_config,
                                                                    tmp_path):
    outputs = {}
    for kind in ("local", "ray"):  # in the same place, one after the other: the stats name cache paths
        shutil.rmtree(tmp_path, ignore_errors=True)
        tmp_path.mkdir()
        # unit_mb = 1 cuts the corpus into several work units: tasks really run apart
        path = micro_config(tmp_path, builtin_corpus, extra="[shards]\nshard_tokens = 4000\n")
        path.write_text(path.read_text().replace(
            "[data]\n", f'[data]\nexecutor = "{kind}"\nworkers = 2\nunit_mb = 1\n', 1))
        cfg = load_config(path)
        assert cfg.data.executor == kind
        art = plan_artifacts(cfg)
        stage_training_inputs(cfg, art)
        outputs[kind] = {name: _files(art[name].dir) for name in ("data", "tokenizer", "shards")}
        assert len(list((art["data"].dir / "train").iterdir())) > 2
    for name, local in outputs["local"].items():
        ray = outputs["ray"][name]
        assert sorted(local) == sorted(ray), name
        differ = [f for f in local if local[f] != ray[f] and _comparable(f, local[f]) != _comparable(f, ray[f])]
        assert not differ, f"{name}: {differ}"
