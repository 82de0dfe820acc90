"""2 gloo ranks on CPU with DDP match 1 rank with the same global batch (torchrun); FSDP2 runs (smoke test)."""
import pytest

from scratchlm.config import load_config
from scratchlm.pipeline import plan_artifacts
from train_procs import losses, prepare_run, train

TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "scratchlm")


@pytest.fixture(scope="module")
def prepared(builtin_corpus, micro_config, tmp_path_factory):
    return prepare_run(builtin_corpus, micro_config, tmp_path_factory)


def test_two_gloo_ranks_match_one_rank_with_the_same_global_batch(prepared):
    path, train_dir = prepared
    single = train(path, "--force")
    assert single.returncode == 0, single.stderr
    one_rank = losses(train_dir)
    two = train(path, "--force", prefix=TORCHRUN)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "x 2 rank(s)" in two.stderr and "(1 micro-batch(es) per step)" in two.stderr
    two_ranks = losses(train_dir)
    # Same sequences, same init; only the order of float additions may differ (all-reduce vs accumulation).
    # Tolerance: 1e-4 nats of loss and 1e-3 relative grad norm per step. Measured on fp32 CPU: bit-identical.
    assert [s for s, _, _ in two_ranks] == [s for s, _, _ in one_rank]
    for (_, a, ga), (_, b, gb) in zip(one_rank, two_ranks):
        assert abs(a - b) < 1e-4 and abs(ga - gb) < 1e-3 * max(1.0, ga)

    fsdp = path.with_name("fsdp.toml")  # same workdir, so the same shards; a different train artifact
    fsdp.write_text(path.read_text().replace("[train]\n", "[train]\nfsdp = true\n", 1))
    sharded = train(fsdp, "--force", prefix=TORCHRUN)
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    # FSDP2 is only smoke-tested: on CPU/gloo its losses drift from the 1-rank run by a timing-dependent amount
    # (1e-5 to 1.4e-2 nats over 60 steps, differing run to run; cause not found), so no agreement is asserted.
    sharded_losses = losses(plan_artifacts(load_config(fsdp))["train"].dir)
    assert [s for s, _, _ in sharded_losses] == [s for s, _, _ in one_rank]
    assert sharded_losses[-1][1] < sharded_losses[0][1] - 0.5

