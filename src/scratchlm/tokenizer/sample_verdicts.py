"""What the tokenizer's sample held against what its quotas asked, as verdicts and log lines.

The stage computes these once, from the sample's composition record, and stores them in tokenizer_info.json: the
log, the run report and `scratchlm check` all show those stored verdicts. A stratum (a domain, or a language of the
prose) whose share is far from its quota is a warning, whatever the reason: the corpus lacks its text, or it fills
what the short strata leave. "Far" is defined once, in far_from_quota.
"""
from __future__ import annotations

from ..config import TokenizerConfig
from .sample import CODE
from .sample_plan import OTHER

SIZE_CHECK = "tokenizer sample size"


def far_from_quota(share: float, quota: float, tolerance: float) -> bool:
    """Off by more than `tolerance` (tokenizer.max_quota_deviation) of the quota itself: 0.76 against 0.10 is far
    at any tolerance; a small quota is held to a small absolute gap, as a language at 2% of a sample against a 1%
    quota gets twice the text it was meant to."""
    return abs(share - quota) > tolerance * quota


def stratum_shares(composition: dict) -> list[tuple[str, str, float, float]]:
    """(kind, name, share, quota) of every stratum with a quota: domains as shares of the sample, languages as
    shares of its prose part, the languages without a quota together as OTHER."""
    out = [("domain", d, r["share"], r["quota"]) for d, r in composition["domains"].items() if r["quota"] is not None]
    quotas = (composition.get("plan") or {}).get("language_quotas")
    if quotas:
        share = {k: r["prose_share"] for k, r in composition["languages"].items() if k != CODE}
        out += [("language", k, share.get(k, 0.0), q) for k, q in quotas.items() if k != OTHER]
        out.append(("language", OTHER, sum(s for k, s in share.items() if k not in quotas), quotas[OTHER]))
    return out


def _stratum(kind: str, name: str) -> str:
    return "languages without a quota" if name == OTHER else f"{kind} {name}"


def _held_text(plan: dict, kind: str, name: str) -> int:
    return plan[f"{kind}_available"].get(name, 0)


def size_verdict(composition: dict, t: TokenizerConfig) -> dict:
    """How large the sample is against the budget, and why: the quotas' largest sample, or the floor."""
    plan, chars = composition["plan"], composition["chars"]
    limits = ", ".join(f"{_stratum(kind, name)} ({_held_text(plan, kind, name):,} characters for a "
                       f"{plan[f'{kind}_quotas'][name]:.1%} quota)" for kind, name in plan["limited_by"])
    check = SIZE_CHECK
    if not plan["quotas_met"]:
        floor = (f"floor of {plan['floor']:,} characters for a {t.vocab_size:,}-token vocabulary (vocab_size x "
                 f"tokenizer.min_sample_chars_per_vocab = {t.min_sample_chars_per_vocab})")
        whole = sum(plan["domain_available"].get(d, 0) for d, q in plan["domain_quotas"].items() if q > 0)
        return {"level": "warning", "check": check,
                "message": f"the quotas cannot be met: a sample on them would hold {plan['on_quota']:,} characters, "
                           f"under the {floor}; used {chars:,} characters instead, all the text of {limits or '-'}"
                           + (f"; the whole training split ({whole:,} characters) is under that floor"
                              if whole < plan["floor"] else "")
                           + ". To meet them: more text of those strata, a smaller vocabulary, or a lower "
                             "tokenizer.min_sample_chars_per_vocab; the strata far from their quotas are named below"}
    if plan["on_quota"] < plan["budget"]:
        return {"level": "ok", "check": check,
                "message": f"sample of {chars:,} characters, under the {plan['budget']:,} budget "
                           f"(tokenizer.sample_chars): the largest that meets every quota, set by {limits}; the "
                           f"other strata were subsampled to their quotas"}
    return {"level": "ok", "check": check,
            "message": f"sample of {chars:,} characters: the budget (tokenizer.sample_chars), drawn to the quotas"}


def quota_verdicts(composition: dict, t: TokenizerConfig) -> list[dict]:
    """A warning per stratum far from its quota, or one ok line with every share."""
    tol, plan = t.max_quota_deviation, composition["plan"]
    limited = {tuple(k) for k in plan["limited_by"]}
    out = []
    for kind, name, share, quota in stratum_shares(composition):
        if not far_from_quota(share, quota, tol):
            continue
        of = "of the sample" if kind == "domain" else "of the prose sample"
        why = (f"the training split holds only {_held_text(plan, kind, name):,} characters of it, all used"
               if (kind, name) in limited else
               "it fills what the strata short of text leave" if share > quota else "")
        out.append({"level": "warning", "check": f"sample quota {_stratum(kind, name)}",
                    "message": f"{_stratum(kind, name)}: {share:.1%} {of} against a quota of {quota:.1%}, off by "
                               f"more than {tol:.0%} of the quota (tokenizer.max_quota_deviation)"
                               + (f"; {why}" if why else "")})
    if out:
        return out
    shares = ", ".join(f"{_stratum(kind, name)} {share:.1%} (quota {quota:.1%})"
                       for kind, name, share, quota in stratum_shares(composition))
    return [{"level": "ok", "check": "sample quotas",
             "message": f"every share within {tol:.0%} of its quota: {shares}"}]


def sample_verdicts(composition: dict, t: TokenizerConfig) -> list[dict]:
    return [size_verdict(composition, t), *quota_verdicts(composition, t)]


def composition_lines(composition: dict, top: int = 8) -> list[str]:
    """What the sample held against what was asked, for the log, from the record the tokenizer manifest keeps.
    Language quotas are shares of the prose part of the sample, so the languages are compared on that part."""
    domains = ", ".join(f"{d} {_pct(r['quota'])} -> {r['share']:.0%}" for d, r in composition["domains"].items())
    lines = [f"sample of {composition['chars']:,} chars from {composition['docs']:,} documents; by domain, quota -> "
             f"actual share of the sample: {domains}"]
    prose = {k: r for k, r in composition["languages"].items() if k != CODE}
    if any(r["quota"] is not None for r in prose.values()):
        langs = ", ".join(f"{k} {_pct(r['quota'])} -> {r['prose_share']:.0%}" for k, r in list(prose.items())[:top])
        lines.append(f"by language, quota -> actual share of the prose sample: {langs}")
    return lines


def _pct(quota: float | None) -> str:
    return "no quota" if quota is None else f"{quota:.0%}"
