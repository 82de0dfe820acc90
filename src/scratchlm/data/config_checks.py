"""The checks of the [data] section that need the data stage's own tables: filter profiles, ledger rule names,
per-language rules and quality thresholds. The stage registry runs them when a config is loaded, so a typo fails
at once, not after minutes of cleaning."""
from __future__ import annotations

import difflib

from ..config import Config
from ..errors import UserError
from .clean.language_rules import rules_for
from .quality_config import PROFILES, check_overrides
from .rules import is_rule, rule_names


def check_data_config(cfg: Config, where: str) -> None:
    d = cfg.data
    *first, last = allowed = [*PROFILES, "auto"]
    for s in d.sources:
        if s.profile is not None and s.profile not in allowed:
            raise UserError(f"{where}: source `{s.name}`: profile must be {', '.join(first)} or {last}, "
                            f"got `{s.profile}`")
        for rule in s.skip_rules:
            if not is_rule(rule):
                close = difflib.get_close_matches(rule, rule_names(), n=1)
                raise UserError(f"{where}: source `{s.name}`: unknown rule `{rule}` in `skip_rules`" + (
                    f"; did you mean `{close[0]}`?" if close else "; see `scratchlm data rejected` for rule names"))
    tables = [("[data.language_rules]", d.language_rules)]
    tables += [(f"source `{s.name}` language_rules", s.language_rules) for s in d.sources]
    for label, table in tables:
        for lang, overrides in table.items():
            try:
                rules_for(lang, overrides)
            except UserError as e:
                raise UserError(f"{where}: {label}: {e}") from None
    check_overrides(d.quality, where)
