"""The `scratchlm plan` and `scratchlm check` commands: parse-free glue between the CLI and the plan package."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from ..config import Config
from ..errors import UserError
from ..pipeline import Artifact
from .check import artifacts_verdict, render_checklist, run_checklist
from .demo import accepted_notes, blocking_errors
from .make import make_plan
from .render import render_plan
from .resume import verify_resume


def plan_command(cfg: Config, art: dict[str, Artifact], args: argparse.Namespace) -> int:
    plan = make_plan(cfg, art, gpu=args.gpu, budget_hours=args.budget_hours, price_per_hour=args.price_per_hour,
                     tokens_per_param=args.tokens_per_param, probe_seconds=args.probe_seconds,
                     remeasure=args.remeasure)
    print(json.dumps(plan, indent=2, default=str) if args.json else render_plan(plan))
    for note in accepted_notes(plan["verdicts"], cfg.run.demo):
        print(f"plan: {note}", file=sys.stderr)
    return 1 if blocking_errors(plan["verdicts"], cfg.run.demo) else 0


def check_command(cfg: Config, plan_artifacts: Callable[[Config], dict[str, Artifact]],
                  args: argparse.Namespace) -> int:
    """plan_artifacts: the stage registry's, for this config and the resume check's copy of it."""
    art = plan_artifacts(cfg)
    whole = artifacts_verdict(art)  # before the plan, which reads them
    if whole.level == "error":
        raise UserError(whole.summary)
    plan = make_plan(cfg, art, budget_hours=args.budget_hours, price_per_hour=args.price_per_hour,
                     probe_seconds=args.probe_seconds, remeasure=args.remeasure)
    resume = None if args.skip_resume else verify_resume(cfg, art, plan_artifacts)
    items = [whole, *run_checklist(cfg, art, plan, resume)]
    if args.json:
        print(json.dumps([v.as_dict() for v in items], indent=2, default=str))
    else:
        print(render_checklist(items))
    return 1 if any(v.level == "error" for v in items) else 0
