"""`scratchlm data audit` (write a labeling sheet) and `scratchlm data audit rate SHEET` (label it)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from ..pipeline import Artifact, require


def add_parser(data: argparse._SubParsersAction) -> None:
    p = data.add_parser("audit", help="sample each cleaning rule's decisions for labeling (audit); label them "
                                      "in the terminal (audit rate SHEET): measured precision per rule")
    p.add_argument("action", nargs="?", choices=("rate",), help="rate: label a sheet in the terminal")
    p.add_argument("sheet", nargs="?", help="the audit sheet (data audit rate)")
    p.add_argument("-c", "--config", help="path to scratchlm.toml")
    p.add_argument("--source", default=None, help="only this source (default: every source)")
    p.add_argument("--per-rule", type=int, default=20, help="decisions sampled per source and rule, and kept "
                                                            "documents per source")
    p.add_argument("--out", default=None, help="sheet path (default: <data dir>/audit/sheet.json)")
    p.add_argument("--force", action="store_true", help="replace a sheet that already holds labels")


def render_figures(figures) -> str:
    from .audit_verdicts import NOT_AUDITED

    audited = [f for f in figures if f.level != NOT_AUDITED]
    lines = [f"  [{'WARNING' if f.level == 'warning' else 'ok':>7}] {f.message()}" for f in audited]
    missing = [f"{'kept documents' if f.kept else f.rule} on {f.source}" for f in figures if f.level == NOT_AUDITED]
    if missing:
        lines.append(f"  not audited: {', '.join(missing)}")
    return "\n".join(lines)


def run_audit_command(args: argparse.Namespace, art: dict[str, Artifact] | None) -> int:
    """art: the artifacts of the config given with -c, None without -c."""
    from .audit_sheet import KEPT, rate_audit_sheet, write_audit_sheet
    from .audit_verdicts import audit_figures

    if args.action == "rate":
        if not args.sheet:
            raise UserError("usage: scratchlm data audit rate SHEET (a sheet written by `scratchlm data audit`)")
        sheet = rate_audit_sheet(Path(args.sheet))
        print(render_figures(audit_figures(sheet["items"], sheet.get("decisions"))))
        return 0
    if art is None:
        raise UserError("scratchlm data audit needs -c CONFIG (or `rate SHEET` to label a sheet)")
    data = require(art, "data")
    path, sheet = write_audit_sheet(data.dir, data.id, args.per_rule, args.source,
                                    Path(args.out) if args.out else None, args.force)
    rules = {(it["source"], it["rule"]) for it in sheet["items"] if it["rule"] != KEPT}
    kept = sum(it["rule"] == KEPT for it in sheet["items"])
    print(f"wrote {path}: {len(sheet['items']) - kept} decisions of {len(rules)} rule(s) per source and {kept} "
          f"kept documents; label them with `scratchlm data audit rate {path}`")
    return 0
