"""`scratchlm check`: the preflight checklist. Each line names the mistake it guards against, then the verdict
and its evidence. A guard whose stage is not built reports "not available", never ok."""
from __future__ import annotations

import subprocess
import tomllib

from ..config import Config
from ..ids import read_json
from ..pipeline import Artifact
from ..forced import forced_line
from .verdicts import NOT_AVAILABLE, Verdict, worst


def forced_verdict(art: dict[str, Artifact]) -> Verdict | None:
    """An error line when this config's training went past error verdicts with --force (recorded in its manifest,
    stages.forced_past), naming them; None for a training not forced, or none yet: nothing to show."""
    train = art["train"]
    forced = train.manifest()["result"].get("forced") if train.done else None
    if not forced:
        return None
    return Verdict("training not forced past an error", "error", forced_line(forced), {"forced": forced})


def _dedup_verdict(art: dict[str, Artifact]) -> Verdict:
    """What the data stage's dedup step did: exact and fuzzy document clusters, paragraphs cut; skipped kinds."""
    name, data = "fuzzy dedup applied", art["data"]
    if not data.done:
        return Verdict(name, NOT_AVAILABLE, "the data stage has not run (`scratchlm data prepare`)", {})
    dedup = read_json(data.dir / "stats.json").get("dedup")
    if dedup is None:
        return Verdict(name, NOT_AVAILABLE, f"{data.dir}/stats.json records no dedup step; this guard is not in "
                       "effect", {})
    skipped = dedup.get("skipped") or []
    para = dedup.get("paragraph") or {}
    summary = (f"{dedup['exact']['duplicates']:,} exact and {dedup['fuzzy']['duplicates']:,} near-duplicate "
               f"documents removed, {para.get('paragraphs', 0):,} duplicate paragraphs cut")
    if "fuzzy_dedup" in skipped:
        return Verdict(name, "warning", summary + "; fuzzy dedup is switched off (data.skip): paraphrases and "
                       "templates pass", dedup)
    return Verdict(name, "ok", summary + (f"; skipped: {', '.join(skipped)}" if skipped else ""), dedup)


def _fertility_verdict(art: dict[str, Artifact]) -> Verdict:
    """The tokenizer stage's held-out fertility verdicts (tokens/word per language, language cost, unused vocab)."""
    name, tok = "tokenizer fertility across the languages of use", art["tokenizer"]
    if not tok.done:
        return Verdict(name, NOT_AVAILABLE, "the tokenizer stage has not run (`scratchlm tokenizer train`)", {})
    found = tok.manifest()["result"].get("verdicts", [])
    problems = [v for v in found if v["level"] != "ok"]
    level = worst(v["level"] for v in found)
    summary = "; ".join(v["message"] for v in problems) or "tokens/word, language cost and vocabulary use all ok"
    return Verdict(name, level, f"{summary} ({tok.dir / 'fertility.json'})", {"verdicts": found})


def _contamination_verdict(art: dict[str, Artifact]) -> Verdict:
    """The decontaminate stage's own verdict: which eval sets were fingerprinted and what was removed."""
    name, stage = "eval contamination checked", art["decontaminate"]
    if not stage.done:
        return Verdict(name, NOT_AVAILABLE, "the decontaminate stage has not run (`scratchlm data decontaminate`); "
                       "this guard is not in effect", {})
    result = stage.manifest()["result"]
    sets = result["eval_sets"]
    touched = {n: r["contaminated_items"] for n, r in sets.items() if r["contaminated_items"]}
    summary = (f"{len(sets)} eval set(s) fingerprinted, {result['docs_scanned']:,} training documents scanned, "
               f"{result['docs_touched']:,} touched, {result['chars_removed']:,} characters removed"
               + (": " + ", ".join(f"{n} {k} item(s) found" for n, k in touched.items()) if touched else "")
               + f" ({result['report']})")
    return Verdict(name, result["verdict"], summary, {"eval_sets": sets, "report": result["report"]})


def artifacts_verdict(art: dict[str, Artifact]) -> Verdict:
    """Every byte of every built stage against the sizes and hashes its manifest recorded (pipeline.Artifact)."""
    name = "stage outputs whole"
    built = [a for a in art.values() if a.done]
    if not built:
        return Verdict(name, NOT_AVAILABLE, "no stage has run yet", {})
    problems = {a.stage: problem for a in built if (problem := a.damage(deep=True))}
    if problems:
        stage, problem = next(iter(problems.items()))
        return Verdict(name, "error", art[stage].damaged(problem), {"damaged": problems})
    listed = {a.stage: len(a.manifest().get("files", {})) for a in built}
    unlisted = [s for s, n in listed.items() if not n]
    return Verdict(name, "ok", f"{sum(listed.values()):,} files of {len(built)} stages hashed and whole"
                   + (f"; {', '.join(unlisted)} built before files were recorded: not checked" if unlisted else ""),
                   {"files": listed})


def _sandbox_verdict(cfg: Config) -> Verdict:
    """Where `eval suite` would run model-written code (HumanEval): the OS sandbox, or why not."""
    from ..eval.sandbox import choose_isolation
    from ..eval.suite import wants_humaneval

    name = "model-written code sandboxed"
    if not wants_humaneval(cfg):
        return Verdict(name, "ok", "no model-written code is run (HumanEval is off: eval.suite.humaneval = "
                       f"\"{cfg.eval.suite.humaneval}\", and \"auto\" runs it only for a code domain)", {})
    isolation, why = choose_isolation(cfg.eval.suite.unsafe_run_code_unsandboxed)
    if isolation is None:
        return Verdict(name, "warning", f"HumanEval (`eval suite`) will refuse to run: {why}",
                       {"isolation": None, "reason": why})
    if why:  # no sandbox, and the user asked for the unsafe path
        return Verdict(name, "warning", f"{isolation.summary}, because {why}", {"isolation": isolation.kind})
    return Verdict(name, "ok", isolation.summary, {"isolation": isolation.kind})


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _audit_verdict(art: dict[str, Artifact]) -> Verdict:
    """The measured precision of each cleaning rule, from the labeled audit sheets in `<data dir>/audit/`."""
    from ..data.audit_sheet import AUDIT_DIR, load_audit_dir
    from ..data.audit_verdicts import MAX_WRONG_RATE, NOT_AUDITED, audit_figures, skip_advice
    from ..errors import UserError

    name, data = "cleaning rules audited", art["data"]
    if not data.done:
        return Verdict(name, NOT_AVAILABLE, "the data stage has not run (`scratchlm data prepare`)", {})
    try:
        audit = load_audit_dir(data.dir)
    except UserError as e:  # a hand-edited sheet gone wrong must not hide the rest of the checklist
        return Verdict(name, "warning", str(e), {})
    make = ("sample the decisions with `scratchlm data audit -c CONFIG`, label them with `scratchlm data audit "
            "rate SHEET`")
    if audit is None:
        return Verdict(name, NOT_AVAILABLE, f"no audit sheet in {data.dir / AUDIT_DIR}: {make}", {})
    figures = audit_figures(audit["items"], audit["decisions"])
    audited = [f for f in figures if f.level != NOT_AUDITED]
    evidence = {"sheets": [str(p) for p in audit["sheets"]], "figures": [f.as_dict() for f in figures]}
    if not audited:
        return Verdict(name, NOT_AVAILABLE, f"no decision labeled yet in {', '.join(map(str, audit['sheets']))}: "
                       f"label them with `scratchlm data audit rate SHEET`", evidence)
    rules = [f for f in audited if not f.kept]
    above = [f for f in audited if f.level == "warning"]
    kept = sum(f.kept for f in audited)
    summary = (f"{_plural(len(rules), 'rule')} audited on {_plural(len({f.source for f in rules}), 'source')}"
               + (f" (and kept documents on {_plural(kept, 'source')})" if kept else "")
               + f", {len(above) or 'none'} above {MAX_WRONG_RATE:.0%}"
               + (": " + "; ".join(f.short() for f in above) if above else ""))
    missing = [f for f in figures if f.level == NOT_AUDITED]
    if missing:
        summary += f"; {len(missing)} not audited"
    advice = skip_advice(figures)
    if advice:
        summary += "; to switch them off put " + " and ".join(advice)
    return Verdict(name, worst(f.level for f in audited), summary, evidence)


def _explicit_weights(cfg: Config) -> list[str]:
    raw = tomllib.loads(cfg.path.read_text(encoding="utf-8")) if cfg.path else {}
    return [s.get("name", "?") for s in raw.get("data", {}).get("sources", []) if "weight" not in s]


def _git_state(cfg: Config) -> str:
    if cfg.path is None:
        return "no config file"
    try:
        r = subprocess.run(["git", "status", "--porcelain", "--", cfg.path.name], cwd=cfg.path.parent,
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "git not available"
    if r.returncode != 0:
        return "not in a git repository"
    return "committed, unchanged" if not r.stdout.strip() else "changed since the last commit"


def run_checklist(cfg: Config, art: dict[str, Artifact], plan: dict, resume: Verdict | None) -> list[Verdict]:
    by_name = {v["name"]: v for v in plan["verdicts"]}
    t = cfg.train
    out: list[Verdict] = []
    forced = forced_verdict(art)
    if forced:  # first: the trained run already went past errors the lines below may show
        out.append(forced)

    c = by_name["corpus"]
    out.append(Verdict("corpus size in tokens, not bytes", c["level"], c["summary"], c["evidence"]))
    e = by_name["epochs"]
    out.append(Verdict("corpus not read too many times", e["level"], e["summary"], e["evidence"]))
    out.append(_dedup_verdict(art))
    out.append(_audit_verdict(art))

    implicit = _explicit_weights(cfg)
    shares = {}
    if art["shards"].done:
        shards = read_json(art["shards"].dir / "shards.json")["train"]
        wsum, tsum = sum(v["weight"] for v in shards.values()), sum(v["tokens"] for v in shards.values())
        shares = {n: {"share_of_training": v["weight"] / wsum, "share_of_corpus": v["tokens"] / max(1, tsum)}
                  for n, v in shards.items()}
    text = ", ".join(f"{n} {s['share_of_training']:.0%} of training ({s['share_of_corpus']:.0%} of tokens)"
                     for n, s in shares.items()) or "shares known once the shards are built"
    out.append(Verdict("domain mix explicit", "warning" if implicit else "ok",
                       (f"sources without an explicit weight (default 1.0): {', '.join(implicit)}; " if implicit
                        else "every source has a weight; ") + text, {"implicit": implicit, "shares": shares}))

    if art["data"].done:
        vplan = read_json(art["data"].dir / "stats.json")["validation_plan"]
        held = {d: p["held_out"] for d, p in vplan.items()}
        level = "ok" if all(held.values()) else ("error" if not any(held.values()) else "warning")
        out.append(Verdict("eval sets split off first", level,
                           "validation drawn per domain from the cleaned corpus before training: "
                           + ", ".join(f"{d} {n} docs" for d, n in held.items()), {"held_out": held}))
        missing = [d for d, n in held.items() if not n]
        out.append(Verdict("per-domain validation configured", "ok" if not missing else "warning",
                           f"{len(held) - len(missing)} of {len(held)} domains have a validation split"
                           + (f"; none for {', '.join(missing)}" if missing else ""), {"held_out": held}))
    else:
        for name in ("eval sets split off first", "per-domain validation configured"):
            out.append(Verdict(name, NOT_AVAILABLE, "the data stage has not run (`scratchlm data prepare`)", {}))
    out.append(_contamination_verdict(art))
    out.append(_fertility_verdict(art))

    fit = [by_name[n] for n in ("memory", "time") if n in by_name]
    level = worst(v["level"] for v in fit)
    out.append(Verdict("plan fits, restart included", level, "; ".join(f"{v['name']}: {v['summary']}" for v in fit),
                       {v["name"]: v["evidence"] for v in fit}))
    ctx = by_name["context"]
    out.append(Verdict("context length matches the data", ctx["level"], ctx["summary"], ctx["evidence"]))
    out.append(resume or Verdict("resume verified on this exact config", NOT_AVAILABLE, "skipped (--skip-resume)",
                                 {}))

    # the step of the mode the plan chose (compiled or eager); plans saved before it was kept: the probe's eager one
    step = (plan.get("time") or {}).get("step_seconds") or (plan.get("probe") or {}).get("step_seconds")
    every = f"every {t.checkpoint_every} steps" + (f" (~{t.checkpoint_every * step / 60:.1f} min of training)"
                                                    if step else "")
    level = "ok" if t.checkpoint_every < t.max_steps and t.keep_last >= 2 else "warning"
    out.append(Verdict("checkpoint interval and retention set", level,
                       f"{every}, keep the last {t.keep_last}"
                       + ("" if level == "ok" else ": a crash loses the whole run or leaves no fallback checkpoint"),
                       {"checkpoint_every": t.checkpoint_every, "keep_last": t.keep_last, "max_steps": t.max_steps}))
    out.append(_sandbox_verdict(cfg))
    from ..sft.report import check_item  # the latest fine-tuning's verdicts, when there is one

    out.append(Verdict(*check_item(cfg.workdir)))
    out.append(Verdict("gradient clipping on", "ok" if t.grad_clip > 0 else "warning",
                       f"grad_clip = {t.grad_clip}" + ("" if t.grad_clip > 0 else
                                                       ": one bad batch can blow up the weights"), {}))
    ids = {s: a.id for s, a in art.items() if s in ("data", "tokenizer", "shards", "train")}
    git = _git_state(cfg)
    out.append(Verdict("config, data and tokenizer versioned", "ok" if git == "committed, unchanged" else "warning",
                       "content-derived IDs " + ", ".join(f"{s} {i}" for s, i in ids.items())
                       + f" (recorded in every checkpoint); config file: {git}", {"ids": ids, "git": git}))
    return out


def render_checklist(items: list[Verdict]) -> str:
    from .render import MARK

    width = max(len(v.name) for v in items)
    lines = ["scratchlm check", ""]
    lines += [f"  [{MARK[v.level]:>7}] {v.name:<{width}}  {v.summary}" for v in items]
    return "\n".join(lines)
