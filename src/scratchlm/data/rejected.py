"""What a reader gives instead of a document it could not read: the prepare stage writes it to the ledger."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Rejected:
    id: str
    rule: str
    detail: str = ""

