"""One answer at a time in the terminal, for the sheets a person fills in (`eval rate`, `data audit rate`).

Kept apart from the sheets themselves so that the data commands need not import the model code.
"""
from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")
SKIP, QUIT = "s", "q"


def ask_answer(ask: Callable[[str], str], prompt: str, parse: Callable[[str], T | None],
               say: Callable[[str], None], hint: str) -> T | str:
    """Ask until `parse` accepts the answer (it returns None to refuse one). `s` and `q` pass through as
    SKIP and QUIT; the end of input (Ctrl-D, a closed pipe) counts as QUIT, so a session always saves."""
    while True:
        try:
            raw = ask(prompt).strip()
        except EOFError:
            return QUIT
        if raw.lower() in (SKIP, QUIT):
            return raw.lower()
        value = parse(raw)
        if value is not None:
            return value
        say(hint)
