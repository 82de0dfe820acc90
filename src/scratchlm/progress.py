"""Progress bars with rate and ETA; quiet when the output is not a terminal unless asked."""
from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm


def bar(iterable=None, *, total=None, desc: str = "", unit: str = "it", **kw):
    # In CI logs a redrawing bar is noise; SCRATCHLM_PROGRESS=1 forces it on, =0 off.
    forced = os.environ.get("SCRATCHLM_PROGRESS")
    disable = (forced == "0") if forced is not None else not sys.stderr.isatty()
    return tqdm(iterable, total=total, desc=desc, unit=unit, unit_scale=True, dynamic_ncols=True,
                disable=disable, mininterval=0.5, **kw)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
