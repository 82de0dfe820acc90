"""The prepare stage's accounting: per source and per domain, documents, characters, bytes and tokens in and
out of every step, the rules that fired, the language distribution and the promotional share."""
from __future__ import annotations

from collections import Counter

from ..config import Config
from .clean.promo import MARKETING_LEVEL
from .html_losses import RULE_PREFIX, html_line, html_summary
from .step_runner import StepRunner

READ_RULES = {"binary", "not_utf8", "unreadable", "malformed_json", "missing_text_field", "line_too_long",
              "empty_file", "truncated", "corrupt_file"}
DAMAGE_RULES = ("truncated", "corrupt_file")  # a file read only up to the damage: what followed it is lost
_COUNTS = ("docs_in", "chars_in", "bytes_in", "docs_out", "chars_out", "bytes_out")


def _add(total: dict, st: dict) -> None:
    for k in _COUNTS:
        total[k] = total.get(k, 0) + st[k]
    for group in ("dropped", "diverted"):
        c = total.setdefault(group, Counter())
        c.update(st.get(group, {}))
    removed = total.setdefault("removed", {})
    for rule, r in st["removed"].items():
        entry = removed.setdefault(rule, {"pieces": 0, "chars": 0})
        entry["pieces"] += r["pieces"]
        entry["chars"] += r["chars"]
    notes = total.setdefault("notes", {})
    for key, values in st.get("notes", {}).items():
        notes.setdefault(key, Counter()).update(values)


def _plain(st: dict) -> dict:
    return {k: (dict(v) if isinstance(v, Counter) else
                {kk: dict(vv) for kk, vv in v.items()} if k == "notes" else v) for k, v in st.items()}


def _with_tokens(st: dict, ratio: float) -> dict:
    st["tokens_in"] = round(st["chars_in"] * ratio)
    st["tokens_out"] = round(st["chars_out"] * ratio)
    return st


def summarize(run: StepRunner, cfg: Config, profile: dict[str, str], tokens: dict, dedup: dict,
              ledger_counts: dict) -> dict:
    steps = [s for s in run.steps if s not in run.observers]
    ratio = tokens["ratio"]
    sources, domains = {}, {}
    for src in cfg.data.sources:
        units = [u for u in run.units if u.source == src.name]
        table, prev = {}, None
        for step in steps:
            applied = [run.stats[step][u.name] for u in units if u.name in run.stats[step]]
            if not applied:
                reason = "in data.skip" if step in cfg.data.skip else f"not run on {profile[src.name]} sources"
                table[step] = {"skipped": reason}
                continue
            total: dict = {}
            for st in applied:
                _add(total, st)
            table[step] = _with_tokens(_plain(total), ratio.get(src.name, 0.0))
            prev = table[step]
        read, dedup_out = table["read"], table["paragraphs"]
        split = prev
        dropped = Counter()
        for st in table.values():
            dropped.update(st.get("dropped", {}))
        lang = table.get("language", {}).get("notes", {})
        promo = table.get("promo", {}).get("notes", {}).get("promo", {})
        marketing = table.get("promo", {}).get("notes", {}).get("promo_marketing", {})
        n_scored = sum(promo.values())
        sources[src.name] = {
            "domain": src.domain, "profile": profile[src.name],
            "docs_in": read["docs_in"], "chars_in": read["chars_in"], "bytes_in": read["bytes_in"],
            "docs_kept": dedup_out["docs_out"], "chars_kept": dedup_out["chars_out"],
            "dropped": dict(dropped),
            "train": {"docs": split["docs_out"], "chars": split["chars_out"], "bytes": split["bytes_out"],
                      "tokens_estimated": round(split["chars_out"] * ratio.get(src.name, 0.0))},
            "languages": dict(lang.get("language_in", {})),
            "promo": {"scored": n_scored, "promotional": promo.get("promotional", 0),
                      "share": promo.get("promotional", 0) / n_scored if n_scored else None,
                      "threshold": cfg.data.promo_threshold,
                      "marketing": marketing.get("marketing", 0), "marketing_level": MARKETING_LEVEL,
                      "marketing_share": marketing.get("marketing", 0) / n_scored if n_scored else None,
                      "score_deciles": dict(table.get("promo", {}).get("notes", {}).get("promo_score_decile", {}))},
            "ledger_records": dict(ledger_counts.get(src.name, {})),
            "steps": table,
        }
        if html := html_summary(read, src.html_extract, cfg.data.html_loss_ledger):
            sources[src.name]["html"] = html
        dom = domains.setdefault(src.domain, {"sources": [], "steps": {}})
        dom["sources"].append(src.name)
        for step, st in table.items():
            if "skipped" not in st:
                agg = dom["steps"].setdefault(step, {"tokens_in": 0, "tokens_out": 0})
                _add(agg, st)
                agg["tokens_in"] += st["tokens_in"]
                agg["tokens_out"] += st["tokens_out"]
    for dom in domains.values():
        dom["steps"] = {k: _plain(v) for k, v in dom["steps"].items()}
    return {"steps": steps, "sources": sources, "domains": domains, "dedup": dedup, "tokens": tokens,
            "cache": {step: n for step, n in run.cached.items() if step not in run.observers}}


HEAVY_LOSS = 0.5  # one step removing more than this share of a source's characters deserves a look
# Above this share of a source's scored documents reading as marketing (promo score >= MARKETING_LEVEL, kept or
# dropped), product pages and vendor blogs dominate the source. Documentation stays far under it: at most 5.6% of
# a source of the cleaning benchmark (man pages, Debian Reference, Python docs) reaches MARKETING_LEVEL.
MARKETING_DOMINANCE = 0.2
_LINE_RULES = ("c4_line", "repeated_line", "boilerplate_line")
_LANGUAGE_RULES = ("language", "language_paragraph")


def _fix(rule: str, name: str, profile: str, found: str, keeps: list[str]) -> str:
    """The config change that stops `rule` from eating source `name`, in the user's words."""
    off = f'or switch the rule off for this source: `skip_rules = ["{rule}"]` in its [[data.sources]] entry'
    if rule.startswith(RULE_PREFIX):
        return (f"the HTML reader left these elements of the pages out (`scratchlm data rejected --source {name} "
                f"--rule {rule}`); if they are body text, set `html_extract = \"full\"` on the source")
    if rule in ("exact_duplicate", "near_duplicate", "contained_duplicate", "paragraph_duplicate"):
        return ("the source repeats itself and one copy of each text is kept; check that the copies are not "
                f"distinct on purpose (`scratchlm data rejected --rule {rule}`)")
    if rule in _LANGUAGE_RULES:
        return (f"detected languages (documents): {found}; the source keeps {keeps or 'all'}: set `languages` "
                f"on the source or `data.languages`")
    if rule == "gopher_stop_words":
        return (f"stop words are checked in each document's detected language ({found}); a language without a "
                f"list has the rule off, so this is a list that does not fit: give one with "
                f"[data.sources.language_rules.<lang>] stop_words = [...], {off}")
    if rule in _LINE_RULES and profile == "prose":
        return f'line rules of web crawl on structured text: try `profile = "technical"` on the source, {off}'
    if profile == "prose":
        return f'for documentation, READMEs or tickets try `profile = "technical"` on the source, {off}'
    return off[3:]


def _damage_warnings(name: str, src: dict) -> list[str]:
    dropped = src["steps"].get("read", {}).get("dropped", {})
    damaged = {rule: dropped[rule] for rule in DAMAGE_RULES if dropped.get(rule)}
    if not damaged:
        return []
    counts = ", ".join(f"{rule} {n}" for rule, n in damaged.items())
    return [f"source `{name}`: {sum(damaged.values())} damaged file(s) ({counts}): the documents before the damage "
            "were kept, the rest of each file is lost; which files and at what byte: `scratchlm data rejected -c "
            f"CONFIG --source {name} --rule {next(iter(damaged))}`"]


def reading_notes(manifest: dict) -> list[str]:
    """One line per source whose files needed decoding other than UTF-8 or had characters repaired, and one per
    source of HTML pages: their text against what was extracted."""
    out = []
    for name, src in manifest["sources"].items():
        notes = src["steps"].get("read", {}).get("notes", {})
        parts = [f"{n} document(s) read as {enc}" for enc, n in sorted(notes.get("encoding", {}).items())]
        chars = notes.get("repaired_chars", {})
        parts += [f"{kind.replace('_', ' ')} in {n} document(s) ({chars.get(kind, 0):,} characters)"
                  for kind, n in sorted(notes.get("repaired_docs", {}).items())]
        if parts:
            out.append(f"source `{name}`: " + "; ".join(parts))
        if "html" in src:
            out.append(html_line(name, src["html"]))
    return out


def marketing_warning(name: str, src: dict) -> list[str]:
    """The dominance verdict: a source whose share of marketing documents is above MARKETING_DOMINANCE."""
    promo = src.get("promo", {})
    share = promo.get("marketing_share")
    if share is None or share <= MARKETING_DOMINANCE:
        return []
    return [f"source `{name}`: {share:.0%} of its documents read as marketing ({promo['marketing']} of "
            f"{promo['scored']} score >= {promo['marketing_level']}, above {MARKETING_DOMINANCE:.0%}; "
            f"{promo['promotional']} dropped at >= {promo['threshold']}): product pages and vendor "
            f"blogs dominate it; read the dropped ones with `scratchlm data rejected -c CONFIG --source {name} "
            f"--rule promotional --sample 5`, and lower `data.promo_threshold` or leave the source out if the kept "
            f"ones sell too"]


def filter_warnings(manifest: dict, wanted_languages: dict[str, tuple[str, ...]]) -> list[str]:
    """One warning per (source, step) that removed more than HEAVY_LOSS of the characters it was given, with the
    rules that did it and, for each of the top ones, the config change that fixes it; and one per source where a
    language-dependent rule was off for lack of a list. A filter set for the wrong kind of text (web-crawl rules
    on manuals, English stop words on Dutch) silently turns a corpus into a fraction of itself; this makes it
    loud."""
    out = []
    for name, src in manifest["sources"].items():
        out += _damage_warnings(name, src)
        out += marketing_warning(name, src)
        for step, st in src["steps"].items():
            if "skipped" in st or step == "split" or not st.get("chars_in"):
                continue
            lost = 1 - st["chars_out"] / st["chars_in"]
            if lost <= HEAVY_LOSS:
                continue
            rules = Counter(st.get("dropped", {}))
            rules.update({r: v["pieces"] for r, v in st.get("removed", {}).items()})
            top = ", ".join(f"{r} ({n})" for r, n in rules.most_common(3))
            found = Counter(src["steps"].get("language", {}).get("notes", {}).get("language_in", {}))
            langs = ", ".join(f"{k} {v}" for k, v in found.most_common(3)) or "not identified"
            fixes = "; ".join(f"{r}: {_fix(r, name, src['profile'], langs, list(wanted_languages[name]))}"
                              for r, _ in rules.most_common(2))
            out.append(f"source `{name}`: the {step} step removed {lost:.0%} of its characters "
                       f"({st['chars_in']:,} -> {st['chars_out']:,}; top rules: {top}); fix: {fixes}; read what "
                       f"went: `scratchlm data rejected -c CONFIG --source {name} --sample 5`")
        if src.get("domain", "").strip().lower() == "code" and src["profile"] != "code":
            prose_drops = sum(sum(src["steps"].get(step, {}).get("dropped", {}).values())
                              for step in ("language", "quality", "promo"))
            out.append(f"source `{name}`: domain code with the {src['profile']} filters: rules for text (stop words, "
                       f"language, promotional wording) judge its files as prose and dropped {prose_drops} of them; "
                       f"`profile = \"code\"` is the default for domain code, remove `profile` from the source")
        off = src["steps"].get("quality", {}).get("notes", {}).get("language_rules_off", {})
        if off:
            listed = ", ".join(f"{k} ({n} docs)" for k, n in sorted(off.items(), key=lambda kv: -kv[1])[:6])
            out.append(f"source `{name}`: language-dependent rules were off for lack of data: {listed}; give "
                       f"values with [data.sources.language_rules.<lang>] (keys: stop_words, min_mean_word_len, "
                       f"max_mean_word_len, min_alpha_word_share, ...)")
    return out
