"""The filter set of each source whose config leaves it to `auto`, chosen from its documents' shape after dedup
(profile_choice.py); the steps after it read a source's filter set through `profile`."""
from __future__ import annotations

from ..progress import log
from .profile_choice import choose_profiles, describe
from .step import Corpus, CorpusContext, CorpusStep
from .step_runner import StepRunner
from .units import Unit


def choose_profile(ctx: CorpusContext) -> dict:
    name = ctx.units[0].source  # a per-source step: all its units are of one source
    return choose_profiles(ctx.runner, {name: ctx.corpus.sources[name]})[name]


def auto(corpus: Corpus, unit: Unit) -> bool:
    return corpus.source(unit).filter_profile == "auto"


def chosen(corpus: Corpus) -> dict[str, dict]:
    """{source: {"profile", "sampled", "technical"}} for every source whose profile was chosen."""
    return {name: d.result for name, d in corpus.decided.get(CHOOSE_PROFILES.name, {}).items()}


def profile(corpus: Corpus, source: str) -> str:
    """The source's filter set: as configured, or as chosen from its documents."""
    choice = chosen(corpus).get(source)
    return choice["profile"] if choice else corpus.sources[source].filter_profile


def log_choices(run: StepRunner, corpus: Corpus) -> None:
    for name, choice in chosen(corpus).items():
        log(f"data: {describe(name, choice)}")


CHOOSE_PROFILES = CorpusStep("choose_profiles", choose_profile, applies=auto, per_source=True, after=log_choices)
