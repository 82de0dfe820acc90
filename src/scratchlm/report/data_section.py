"""The report's Data section: in and out of every prepare step per source and per domain, in documents,
characters, bytes and tokens, the rules that fired, languages, promotional share, dedup clusters and the
corpus-size verdict."""
from __future__ import annotations

from pathlib import Path

from ..data.html_losses import html_line
from ..data.token_estimate import size_verdict
from .markers_section import markers_lines

TOP_RULES = 3


def _fmt(n: int | float | None) -> str:
    return "" if n is None else f"{n:,}" if isinstance(n, int) else f"{n:,.0f}"


def _rules(st: dict) -> str:
    fired = [(n, f"{r}: {n}") for r, n in st.get("dropped", {}).items()]
    fired += [(v["pieces"], f"{r}: {v['pieces']} pieces / {v['chars']:,} chars") for r, v in st.get("removed", {}).items()]
    fired += [(n, f"{name}: {n}") for name, n in st.get("diverted", {}).items()]
    tails = st.get("notes", {}).get("val_piece", {})
    if tails.get("docs"):
        fired.append((tails["docs"], f"val tails: {tails['docs']} ({tails['chars']:,} chars)"))
    return "; ".join(text for _, text in sorted(fired, reverse=True)[:TOP_RULES]) or "-"


def real_ratios(data: dict, shards: dict | None) -> dict[str, float]:
    """tokens/char per source from the tokenized training shards (each document's BOS and EOS included)."""
    out = {}
    for name, s in data["sources"].items():
        tokens = ((shards or {}).get("train", {}).get(name) or {}).get("tokens")
        if tokens and s["train"]["chars"]:
            out[name] = tokens / s["train"]["chars"]
    return out


def step_tokens(data: dict, real: dict[str, float]) -> dict[str, dict[str, dict]]:
    """Tokens in and out of every step, per source and per domain: characters x the source's tokens/char in the
    shards where they exist (the split step's output is then the shards' own count), else the prepare stage's
    estimate, marked `estimated`. A domain is the sum of its sources, so every table adds up to the same total."""
    out: dict[str, dict[str, dict]] = {"sources": {}, "domains": {}}
    for name, s in data["sources"].items():
        ratio = real.get(name)
        rows = out["sources"][name] = {}
        for step, st in s["steps"].items():
            if "skipped" in st:
                continue
            if ratio is None:
                rows[step] = {"in": st["tokens_in"], "out": st["tokens_out"], "estimated": True}
            else:
                rows[step] = {"in": round(st["chars_in"] * ratio), "out": round(st["chars_out"] * ratio),
                              "estimated": False}
            dom = out["domains"].setdefault(s["domain"], {}).setdefault(step, {"in": 0, "out": 0, "estimated": False})
            dom["in"] += rows[step]["in"]
            dom["out"] += rows[step]["out"]
            dom["estimated"] |= rows[step]["estimated"]
    return out


def _tokens(t: dict | None) -> str:
    if t is None:
        return ""
    return ("est. " if t["estimated"] else "") + f"{_fmt(t['in'])} → {_fmt(t['out'])}"


def _step_rows(steps: dict, order: list[str], tokens: dict[str, dict]) -> list[list]:
    rows = []
    for step in order:
        st = steps.get(step)
        if st is None:
            continue
        if "skipped" in st:
            rows.append([step, "", "", "", "", "", "", f"skipped: {st['skipped']}"])
            continue
        rows.append([step, _fmt(st["docs_in"]), _fmt(st["docs_out"]), _fmt(st["chars_in"]), _fmt(st["chars_out"]),
                     _fmt(st["bytes_out"]), _tokens(tokens.get(step)), _rules(st)])
    return rows


def source_table(data: dict, shards: dict | None, tokens: dict, table) -> str:
    """Per source: what was read and kept, then the training split alone, in the shards' counts once they exist
    (the decontaminate stage may have removed some since the prepare stage)."""
    rows = []
    for name, s in data["sources"].items():
        shard = ((shards or {}).get("train") or {}).get(name)
        if shard:
            train = [shard["docs"], shard["chars"], _fmt(shard["tokens"])]
        else:
            split = tokens["sources"][name].get(data["steps"][-1])
            train = [s["train"]["docs"], s["train"]["chars"], "est. " + _fmt(split["out"]) if split else ""]
        weight = shard["weight"] if shard else None
        rows.append([name, s["domain"], _fmt(s["docs_in"]), _fmt(s["docs_kept"]), _fmt(s["chars_kept"]),
                     *(_fmt(v) if isinstance(v, int) else v for v in train), weight])
    return table(["source", "domain", "docs in", "docs kept (train + val)", "chars kept (train + val)",
                  "train docs", "train chars", "train tokens", "weight"], rows)


def validation_table(data: dict, shards: dict | None, table) -> str:
    """Per domain: the validation split against the config's limits, with the note when it falls short."""
    rows = []
    for d, p in data["validation_plan"].items():
        held = f"{p['held_out']}" + (f", of which {p['pieces']} tail(s)" if p.get("pieces") else "")
        share = f"{p['share']:.1%}" if "share" in p else ""
        rows.append([d, _fmt(p["clean_docs"]), held, _fmt(p.get("held_out_chars")), share,
                     _fmt(((shards or {}).get("val") or {}).get(d, {}).get("tokens")), p["note"]])
    return table(["domain", "clean docs", "held out", "val chars", "share of domain chars", "val tokens", "note"],
                 rows)


def _clusters(name: str, c: dict) -> list[str]:
    if not c.get("duplicates"):
        return [f"- {name}: no duplicates."]
    sizes = ", ".join(f"{n}× size {k}" for k, n in c["sizes"].items())
    lines = [f"- {name}: {c['clusters']:,} clusters, {c['duplicates']:,} documents dropped (cluster sizes: {sizes})."]
    for ex in c["examples"]:
        lines.append(f"  - kept `{ex['kept']}` (cluster of {ex['size']}; dropped e.g. "
                     f"{', '.join(f'`{d}`' for d in ex['duplicates'])}): {ex['excerpt'][:100]!r}")
    return lines


def _audit_decisions(data: dict, data_dir: Path) -> tuple[dict | None, dict]:
    """Labeled audit items and the decisions each rule made; without a sheet, the ledger's counts and the
    kept documents, every rule then not audited."""
    from ..data.audit_sheet import KEPT, count_ledger, load_audit_dir

    audit = load_audit_dir(data_dir)
    if audit is not None:
        return audit, audit["decisions"]
    counts = count_ledger(data_dir)
    return None, {name: {**counts.get(name, {}), KEPT: s["train"]["docs"]} for name, s in data["sources"].items()}


def audit_section(data: dict, data_dir: Path, table) -> list[str]:
    """Measured precision per cleaning rule (`scratchlm data audit`): the figures of data/audit_verdicts.py."""
    from ..data.audit_sheet import AUDIT_DIR
    from ..data.audit_verdicts import MAX_WRONG_RATE, NOT_AUDITED, audit_figures, skip_advice
    from ..errors import UserError

    md = ["### Cleaning rules: measured precision", ""]
    try:
        audit, decisions = _audit_decisions(data, data_dir)
    except UserError as e:
        return md + [f"**Audit sheet unreadable:** {e}", ""]
    figures = audit_figures(audit["items"] if audit else [], decisions)
    where = (", ".join(f"`{p}`" for p in audit["sheets"]) if audit else
             f"no sheet yet in `{data_dir / AUDIT_DIR}`: `scratchlm data audit -c CONFIG`, then "
             "`scratchlm data audit rate SHEET`")
    md += [f"Each rule's decisions sampled evenly from the ledger and labeled by a person ({where}). FP rate: "
           "removals labeled wrong / labeled; for `kept` it is the false-negative rate, kept documents that should "
           f"have gone. 95% Wilson score interval; above {MAX_WRONG_RATE:.0%} is a warning, a rule with no label is "
           "not audited.", ""]
    rows = []
    for f in figures:
        audited = f.level != NOT_AUDITED
        interval = f"{f.low:.0%} – {f.high:.0%}" if audited else ""
        rows.append([f.source, f"{f.rule} (junk kept)" if f.kept else f.rule, _fmt(f.decisions), f.labeled,
                     f.wrong if audited else "", f"{f.rate:.0%}" if audited else "", interval, f.level])
    md += [table(["source", "rule", "decisions", "labeled", "wrong", "FP rate", "95% interval", "verdict"], rows),
           ""]
    md += [f"- **Warning:** {f.message()}." for f in figures if f.level == "warning"]
    advice = skip_advice(figures)
    if advice:
        md.append(f"- To switch the rules above {MAX_WRONG_RATE:.0%} off: " + "; ".join(advice) + ".")
    return md + ([""] if md[-1] else [])


def data_section(data: dict, shards: dict | None, n_params: int | None, table,
                 data_dir: Path | None = None) -> list[str]:
    real = real_ratios(data, shards)
    tokens = step_tokens(data, real)
    order = data["steps"]
    md = ["## Data", ""]
    if shards and n_params:
        total = sum(v.get("tokens", 0) for v in shards["train"].values())
        verdict = size_verdict(total, n_params, "counted by the trained tokenizer")
    else:
        verdict = data["verdict"]
    md += [f"**Corpus size: {verdict['level']}.** {verdict['message']}.", ""]
    md += [f"**Warning:** {w}" for w in data.get("warnings", [])] + ([""] if data.get("warnings") else [])
    est = data["tokens"]
    ratios = ", ".join(f"{k} {v:.3f}" for k, v in est["ratio"].items())
    md.append("Tokens per step: characters × "
              + ("the real tokens/char of each source in the tokenized shards, so the split step's output is the "
                 "shards' count" if real else "the prepare stage's estimated tokens/char (marked est.)")
              + f". The prepare stage's estimate ({est['method']}; sample of {est.get('sample_docs', 0)} documents, "
                f"{est['sample_chars']:,} characters) was tokens/char: {ratios}"
              + (f"; measured on the shards: {', '.join(f'{k} {v:.3f}' for k, v in real.items())}." if real else ".")
              + " Characters and documents include the validation split up to the split step.")
    md.append("")
    header = ["step", "docs in", "docs out", "chars in", "chars out", "bytes out", "tokens in → out", "top rules"]
    for name, s in data["sources"].items():
        md += [f"### Source `{name}` (domain `{s['domain']}`, {s['profile']} filters)", ""]
        if "profile_choice" in s:
            from ..data.profile_choice import describe

            md += [describe(name, s["profile_choice"]).removeprefix(f"source `{name}`: ").capitalize() + ".", ""]
        md.append(table(header, _step_rows(s["steps"], order, tokens["sources"][name])))
        if "html" in s:  # the read step's chars in are the pages' text: what extraction dropped is its first loss
            line = html_line(name, s["html"]).removeprefix(f"source `{name}`: ")
            md += ["", line[:1].upper() + line[1:] + "."]
        kept_share = s["train"]["chars"] / s["chars_in"] if s["chars_in"] else 0
        langs = ", ".join(f"{k} {v}" for k, v in sorted(s["languages"].items(), key=lambda kv: -kv[1])) or \
            "not identified (code source or step skipped)"
        promo = s["promo"]
        share = (f"source `{name}` is {promo['share']:.1%} promotional ({promo['promotional']} of {promo['scored']} "
                 f"documents score ≥ {promo['threshold']})") if promo["share"] is not None else "promo step not run"
        if promo.get("marketing_share") is not None:
            share += (f"; {promo['marketing_share']:.1%} read as marketing, kept or not ({promo['marketing']} "
                      f"score ≥ {promo['marketing_level']})")
        md += ["", f"{kept_share:.1%} of the characters reach training. Languages (documents, before the filter): "
                   f"{langs}. Promotional: {share}.", ""]
    md += ["### Per domain", ""]
    rows = []
    for domain, dom in data["domains"].items():
        for step in order:
            st = dom["steps"].get(step)
            if st:
                rows.append([domain, step, _fmt(st["docs_in"]), _fmt(st["docs_out"]),
                             _tokens(tokens["domains"][domain].get(step)), _rules(st)])
    md += [table(["domain", "step", "docs in", "docs out", "tokens in → out", "top rules"], rows), ""]
    md += ["### Per source", "", source_table(data, shards, tokens, table), ""]
    md += ["### Validation split", "", "Drawn per domain from the cleaned corpus before training, within "
           "`data.val_max_share` of the domain's characters:", "", validation_table(data, shards, table), ""]
    dedup = data["dedup"]
    md += ["### Dedup clusters", ""]
    md += _clusters("exact (normalized text)", dedup["exact"]) + _clusters("near (MinHash LSH)", dedup["fuzzy"])
    p = dedup.get("paragraph", {})
    md.append(f"- paragraphs: {p.get('paragraphs', 0):,} duplicate paragraphs ({p.get('chars', 0):,} chars) cut "
              f"from {p.get('docs', 0):,} documents.")
    if dedup.get("skipped"):
        md.append(f"- skipped by config: {', '.join(dedup['skipped'])}.")
    md += markers_lines(data, shards, table)
    if data_dir is not None:
        md += [""] + audit_section(data, Path(data_dir), table)
    md += ["", "Every dropped document, line and paragraph is in the ledger (`rejected-*.jsonl.zst`): "
               "`scratchlm data rejected -c CONFIG --rule RULE --sample 5`, `scratchlm data explain -c CONFIG DOC_ID`; "
               "a kept document's final text: `scratchlm data show -c CONFIG DOC_ID`.",
           ""]
    return md
