"""Domain mix arithmetic: target shares from weights, epochs, achieved shares, and the two warnings."""
import pytest

from scratchlm.train.mix import mix_from_shards, plan_mix

SOURCES = [{"name": "big", "domain": "web", "weight": 1.0, "tokens": 1_000_000},
           {"name": "small", "domain": "code", "weight": 1.0, "tokens": 10_000},
           {"name": "tiny", "domain": "legal", "weight": 5.0, "tokens": 50}]


def test_targets_epochs_and_warnings():
    plan = plan_mix(SOURCES, planned_tokens=200_000, seq_len=64, eval_domains=["code", "legal", "science", ""])
    big, small, tiny = plan.sources
    # tiny cannot give one 65-token window, so it is never sampled and its weight goes to the others
    assert (big.target_share, small.target_share, tiny.target_share) == (0.5, 0.5, 0.0)
    assert big.target_tokens == small.target_tokens == 100_000 and tiny.target_tokens == 0
    assert big.epochs == pytest.approx(0.1) and small.epochs == pytest.approx(10.0)
    assert "too small" in tiny.note and plan.sequences == 200_000 // 64
    assert plan.verdict == "warning" and len(plan.warnings) == 3
    assert "`small` is repeated 10.0 times" in plan.warnings[0]
    assert "`legal`" in plan.warnings[1] and "`science`" in plan.warnings[2]  # code has half the tokens: fine


def test_no_warning_for_a_balanced_plan():
    plan = plan_mix(SOURCES[:2], planned_tokens=20_000, seq_len=64, eval_domains=["web"])
    assert plan.verdict == "ok" and plan.warnings == []
    assert "achieved" not in plan.to_markdown()[2]


def test_achieved_shares_come_from_the_drawn_tokens():
    shards = {"train": {s["name"]: {"domain": s["domain"], "weight": s["weight"], "tokens": s["tokens"]}
                        for s in SOURCES[:2]}}
    plan = mix_from_shards(shards, 40_000, 64, epochs_per_source={"big": 0.03, "small": 1.0})
    big, small = plan.sources
    assert (big.achieved_tokens, small.achieved_tokens) == (30_000, 10_000)
    assert (big.achieved_share, small.achieved_share) == (0.75, 0.25)
    table = "\n".join(plan.to_markdown())
    assert "| big | web | 1 | 1,000,000 | 50.0% | 20,000 | 0.02 | 75.0% | 30,000 |" in table
