"""Repetition and distinct-n verdicts of the eval suite: loops inside a word and word loops are flagged, natural
prose and code in several languages pass, and the checkpoint report shows the verdict."""
import inspect
import json
import random

import pytest

from scratchlm.eval.diversity import (
    diversity_metrics,
    diversity_verdicts,
    verdict_lines,
)
from scratchlm.eval.report import checkpoint_section
from scratchlm.model.repetition import compression_ratio, repeated_char_ngram_rate

PROSE = [
    "The committee met on Tuesday to discuss the budget for next year. Several members argued that the library "
    "should stay open later in the evening, while others wanted to spend the money on repairing the roof first.",
    "Der Zug nach Hamburg hatte wieder einmal Verspätung, und die Reisenden standen dicht gedrängt auf dem "
    "Bahnsteig. Eine ältere Dame erzählte, dass sie seit dreißig Jahren jeden Sommer an die Nordsee fahre.",
    "Le marché du samedi matin attire des gens de tout le quartier. On y trouve des fromages de la région, du "
    "pain encore chaud et des fleurs que les enfants choisissent avec beaucoup de sérieux pour leur mère.",
    "El río atraviesa la ciudad de norte a sur y en verano los vecinos bajan a sus orillas para escapar del "
    "calor. Por la noche se encienden las farolas del puente y los músicos tocan hasta muy tarde.",
    "Каждое утро он выходил из дома ровно в семь часов, покупал газету в киоске на углу и шёл пешком до "
    "работы, хотя автобус останавливался прямо у подъезда и ехать было бы гораздо быстрее.",
]


def _code_chunks() -> list[str]:
    source = inspect.getsource(json) + inspect.getsource(random)
    return [source[i:i + 300] for i in range(0, 300 * 12, 300)]


def _levels(texts):
    return {v["name"]: v["level"] for v in diversity_verdicts(diversity_metrics(texts))}


@pytest.mark.parametrize("loop", ["cpcpcpcp_____", "the ", "I am a model. ", "print(1)\n"])
def test_looping_samples_are_flagged(loop):
    texts = [(loop * 40)[:300] for _ in range(8)]
    assert _levels(texts)["repetition"] == "error"
    if " " in loop.strip():  # word loops are also generations that say the same thing
        assert _levels(texts)["distinct-2"] == "error"


def test_loop_inside_one_word_is_invisible_to_word_ngrams_but_not_to_characters():
    text = "cpcpcpcp_____" * 30
    assert diversity_metrics([text])["repeated_4gram_rate"] is None  # one "word": no word 4-gram at all
    assert repeated_char_ngram_rate(text) > 0.9 and compression_ratio(text) < 0.15


def test_half_looping_generations_are_an_error_a_third_a_warning():
    loop = ("the the " * 40)[:300]
    assert _levels(PROSE[:4] + [loop] * 4)["repetition"] == "error"
    assert _levels(PROSE + [loop] * 3)["repetition"] == "warning"


@pytest.mark.parametrize("texts", [PROSE, _code_chunks()], ids=["prose in 5 languages", "python source"])
def test_natural_texts_pass(texts):
    assert set(_levels(texts).values()) == {"ok"}


def test_verdict_names_number_and_threshold_and_shows_in_the_report(tmp_path):
    div = diversity_metrics([("cpcpcpcp_____" * 30)] * 4)
    line = verdict_lines(div)[0]
    assert line.startswith("error: repetition:") and "97%" in line and "error at 45%" in line
    (tmp_path / "eval.json").write_text(json.dumps({
        "checkpoint_id": "abc", "step": 1, "date": "today", "domains": {}, "diversity": div, "tasks": {}}))
    assert any("**error**: repetition" in md for md in checkpoint_section(tmp_path))
