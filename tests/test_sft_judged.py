"""SFT is judged on conversations it never trained on: the held-out split, the answer scores and the verdicts
(collapse, memorisation, held-out loss rising, epochs), on planted cases whose verdict is known."""
import json

import pytest

from scratchlm.config import Config, SFTConfig
from scratchlm.errors import UserError
from scratchlm.sft.answers import evenly_spread, normalize, score, word_f1
from scratchlm.sft.split import split_conversations
from scratchlm.sft.verdicts import collapse_verdict, epochs_verdict, heldout_loss_verdict, memorisation_verdict


def _pairs(path, n, answer=lambda i: f"respuesta número {i}"):
    path.write_text("".join(json.dumps({"prompt": f"pregunta {i}", "response": answer(i)}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path


def _cfg(tmp_path, **sft):
    cfg = Config(sft=SFTConfig(**sft))
    cfg.path = tmp_path / "scratchlm.toml"
    return cfg


def test_a_drawn_split_holds_out_whole_conversations_the_same_each_time(tmp_path):
    data = _pairs(tmp_path / "pairs.jsonl", 50)
    a = split_conversations(_cfg(tmp_path, heldout_share=0.1), data)
    b = split_conversations(_cfg(tmp_path, heldout_share=0.1), data)
    assert len(a.heldout) == 5 and len(a.train) == 45 and a.heldout == b.heldout
    assert sorted(a.train_lines + a.heldout_lines) == list(range(1, 51))  # every line on exactly one side
    held_prompts = {c[0]["content"] for c in a.heldout}
    assert not held_prompts & {c[0]["content"] for c in a.train}
    other = split_conversations(_cfg(tmp_path, heldout_share=0.1, seed=7), data)
    assert other.heldout != a.heldout  # the seed draws
    assert split_conversations(_cfg(tmp_path, heldout_share=0.0), data).heldout == []


def test_a_given_heldout_file_is_used_as_is_and_a_single_pair_cannot_be_split(tmp_path):
    data = _pairs(tmp_path / "pairs.jsonl", 8)
    _pairs(tmp_path / "held.jsonl", 3, answer=lambda i: f"otra {i}")
    split = split_conversations(_cfg(tmp_path, heldout="held.jsonl"), data)
    assert len(split.train) == 8 and len(split.heldout) == 3 and split.given == tmp_path / "held.jsonl"
    with pytest.raises(UserError, match="at least 2 conversations"):
        split_conversations(_cfg(tmp_path), _pairs(tmp_path / "one.jsonl", 1))


def test_scores_normalize_case_punctuation_and_keep_accents():
    assert normalize("¿Qué HACE  ls?") == "qué hace ls"
    assert word_f1("Lista el contenido.", "lista el contenido de un directorio") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert word_f1("", "") == 1.0 and word_f1("x", "") == 0.0
    assert evenly_spread(list(range(10)), 3) == [0, 3, 6] and evenly_spread([1, 2], 5) == [1, 2]


def _answers(texts, ended=True):
    return [(t, ended) for t in texts]


REFERENCES = [f"el comando c{i} hace la tarea {i}" for i in range(20)]


def test_a_stock_answer_to_every_prompt_is_collapse():
    stock = score(_answers(["consulte el manual"] * 20), REFERENCES)
    v = collapse_verdict(stock)
    assert v["level"] == "error" and "stock answer" in v["message"] and stock["most_common_share"] == 1.0
    # fewer distinct answers than half the references' variety, though no single answer dominates
    few = score(_answers([f"respuesta {i % 4}" for i in range(20)]), REFERENCES)
    assert few["most_common_share"] == 0.25 and collapse_verdict(few)["level"] == "error"


def test_varied_answers_are_not_collapse_even_when_wrong():
    varied = score(_answers([f"algo distinto {i}" for i in range(20)], ended=False), REFERENCES)
    assert collapse_verdict(varied)["level"] == "ok" and varied["end_share"] == 0.0


def test_training_prompts_answered_far_better_than_heldout_ones_is_memorisation():
    recited = score(_answers(REFERENCES), REFERENCES)
    unseen = score(_answers([f"el comando hace {i}" for i in range(20)]), REFERENCES)
    assert recited["exact_match"] == 1.0 and unseen["exact_match"] == 0.0
    assert memorisation_verdict(unseen, recited)["level"] == "warning"
    assert memorisation_verdict(recited, recited)["level"] == "ok"
    assert memorisation_verdict(None, recited)["level"] == "not available"


def _points(heldout, train):
    return [{"step": 10 * i, "heldout_loss": h, "train_loss": t} for i, (h, t) in enumerate(zip(heldout, train))]


def test_heldout_loss_rising_while_training_loss_falls_warns_and_names_the_best_step():
    rising = heldout_loss_verdict(_points([3.0, 2.5, 2.4, 2.6, 2.9], [None, 2.8, 2.2, 1.5, 0.9]))
    assert rising["level"] == "warning" and "stop near step 20" in rising["message"]
    falling = heldout_loss_verdict(_points([3.0, 2.5, 2.4, 2.3], [None, 2.8, 2.2, 2.0]))
    assert falling["level"] == "ok"
    both_up = heldout_loss_verdict(_points([3.0, 2.5, 2.9], [None, 2.0, 2.4]))  # a bad LR, not overfitting
    assert both_up["level"] == "ok"
    assert heldout_loss_verdict([])["level"] == "not available"


def test_epochs_past_the_bound_warn():
    assert epochs_verdict(6.5, 5.0)["level"] == "warning"
    assert epochs_verdict(2.0, 5.0)["level"] == "ok"


def test_too_few_answers_are_not_judged():
    two = score(_answers(["igual", "igual"]), REFERENCES[:2])
    assert collapse_verdict(two)["level"] == "not available"
    assert memorisation_verdict(two, two)["level"] == "not available"


def test_one_answer_for_a_set_whose_references_are_mostly_one_answer_is_not_collapse():
    """A yes/no set: "yes" rightly answers most of it. The model's answers are no less varied than the
    references, and no answer is more common than the most common reference."""
    references = ["yes"] * 14 + ["no"] * 6
    mostly_yes = score(_answers(["yes"] * 14 + ["no"] * 6), references)
    assert collapse_verdict(mostly_yes)["level"] == "ok"
    all_yes = score(_answers(["yes"] * 20), references)  # 100% against the references' 70%
    assert collapse_verdict(all_yes)["level"] == "error"
