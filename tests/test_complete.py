"""Prompt in, text out (model/complete.py), the helper every generation path calls: what it streams is what it
returns, and a stop string cuts the text where it starts."""
from ship_fixtures import make_checkpoint

from scratchlm.model.checkpoint import load_model
from scratchlm.model.complete import complete_text


def test_streamed_pieces_make_the_returned_text_and_a_stop_string_cuts_it(tmp_path):
    model, tok, _ = load_model(make_checkpoint(tmp_path))
    pieces = []
    text = complete_text(model, tok, "def ", 30, write=pieces.append, temperature=1.0, seed=0)
    assert len(pieces) > 1 and "".join(pieces) == text
    stop = text[len(text) // 2:][:2]
    cut = complete_text(model, tok, "def ", 30, stop=(stop,), temperature=1.0, seed=0)
    assert cut == text[:text.find(stop)]
