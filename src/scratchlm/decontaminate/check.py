"""The standalone check (`scratchlm data contamination`): any training files against any eval files, no config.
The training data is only read, in a stream; nothing is removed or written."""
from __future__ import annotations

import os

from ..data.dedup.ngram_index import DEFAULT_MIN_WORDS, DEFAULT_NGRAM, ContaminationIndex
from ..errors import UserError
from .corpus_scan import scan_corpus
from .files import eval_set_name, expand_paths, iter_train_documents, load_eval_set
from .report import ContaminationReport


def check_files(
    train_paths: list[str],
    eval_paths: list[str],
    ngram: int = DEFAULT_NGRAM,
    *,
    min_words: int = DEFAULT_MIN_WORDS,
    workers: int | None = None,
    mode: str = "document",
) -> ContaminationReport:
    """The report of the eval files' items found in the training files (files or folders); each eval file is
    one eval set, named after the file. `mode` decides how removed characters are counted."""
    if not eval_paths:
        raise UserError("contamination check needs at least one --eval file")
    if not train_paths:
        raise UserError("contamination check needs at least one --train file")
    taken: set[str] = set()
    items: list[tuple[str, str, str]] = []
    for path in expand_paths(eval_paths, "eval set"):
        items.extend(load_eval_set(eval_set_name(path, taken), path))
    index = ContaminationIndex.build(items, n=ngram, min_words=min_words)
    docs = (doc for path in expand_paths(train_paths, "training file") for doc in iter_train_documents(path))
    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    return scan_corpus(index, docs, mode=mode, workers=workers)
