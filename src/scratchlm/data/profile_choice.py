"""Which filter set a source gets when its config names none: `technical` for documentation, `prose` otherwise.

The `prose` rules are Gopher's, C4's and FineWeb's, tuned on English web crawl: a page with one "{" goes
(C4), a line without a full stop goes (C4), a page of short lines goes (FineWeb). On man pages and manuals they
kept 0 to 32% of the text on the holdout corpus of docs/benchmarks.md, while `technical` kept 54 to 100%. A
user who writes `domain = "manpages"` and no profile should not have to know that. So the prepare stage reads
a spread sample of each such source after dedup and looks at each document's shape: the share of its
characters in headings, option lines, tables and code (clean/structure.py), the share of its words that are
paths, options, identifiers or markup, and whether it holds a code block. A source where enough documents look
like documentation gets `technical`; web pages, articles and other prose keep the web-crawl rules.
"""
from __future__ import annotations

from itertools import islice

from ..config import SourceConfig
from .clean.structure import BLANK, CODE, HEADING, NOT_A_WORD, OPTION, TABLE, parse
from .step_runner import StepRunner

SAMPLE_DOCS = 200  # documents read per source, from up to SAMPLE_UNITS work units spread over it
SAMPLE_UNITS = 8
STRUCTURE_SHARE = 0.10  # of a document's characters in headings, options, tables and code: a manual's shape
TECHNICAL_WORDS = 0.03  # of its words that are paths, options, identifiers or markup: a manual's vocabulary
CODE_BLOCK_LINES = 3  # consecutive code lines: an example, a config snippet, command output
TECHNICAL_DOCS = 0.4  # of a source's sampled documents looking like documentation: the source is documentation


def document_shape(text: str) -> tuple[float, float, bool]:
    """(structure share, technical-word share, whether it holds a code block) of one document."""
    lines = [line for line in parse(text) if line.kind != BLANK]
    chars = sum(len(line.text.strip()) for line in lines)
    structural = sum(len(line.text.strip()) for line in lines if line.kind in (HEADING, OPTION, TABLE, CODE))
    words = text.split()
    technical = sum(bool(NOT_A_WORD.search(w)) for w in words)
    run = longest = 0
    for line in lines:
        run = run + 1 if line.kind == CODE else 0
        longest = max(longest, run)
    return structural / max(chars, 1), technical / max(len(words), 1), longest >= CODE_BLOCK_LINES


def looks_technical(text: str) -> bool:
    structure, words, code_block = document_shape(text)
    return structure >= STRUCTURE_SHARE or words >= TECHNICAL_WORDS or code_block


def choose_profiles(run: StepRunner, sources: dict[str, SourceConfig]) -> dict[str, dict]:
    """{source: {"profile", "sampled", "technical"}} for every source whose profile is `auto`."""
    out = {}
    for name, source in sources.items():
        if source.filter_profile != "auto":
            continue
        units = [u for u in run.units if u.source == name]
        picked = [units[(i * len(units)) // SAMPLE_UNITS] for i in range(min(SAMPLE_UNITS, len(units)))]
        per_unit = SAMPLE_DOCS // len(picked)
        sample = (doc["text"] for unit in picked for _, doc in islice(run.iter_docs([unit]), per_unit))
        # judged in the workers, a few at a time: 200 long changelogs took 7 s to parse in the main process
        verdicts = list(run.executor.imap(looks_technical, sample))
        sampled, technical = len(verdicts), sum(verdicts)
        profile = "technical" if sampled and technical >= TECHNICAL_DOCS * sampled else "prose"
        out[name] = {"profile": profile, "sampled": sampled, "technical": technical}
    return out


def describe(name: str, choice: dict) -> str:
    """The log's and the report's line about one automatic choice."""
    return (f"source `{name}`: profile {choice['profile']}, chosen from its documents ({choice['technical']} of "
            f"{choice['sampled']} sampled look like documentation: headings, options, tables, code blocks, paths; "
            f"the source is {'documentation' if choice['profile'] == 'technical' else 'prose'} at "
            f"{TECHNICAL_DOCS:.0%}); set `profile` on the source to choose yourself")
