"""The Librarian Gate: the only way anything reaches memory storage.

Requests and results (``requests``), Layer 1's checks (``checks``: schema, ``access``, ``pii``,
``rate_limit``, classification), Layer 2's advisor (``advisor``), the write transaction
(``write_path``), conflict resolution (``resolution``), signals (metrics and logs) and the
Gate itself (``librarian``). ADR-008 has the rules.

The names below are imported on first use: a module that needs only ``access`` or
``requests`` (the admin commands do) does not pay for the Gate's classifier and PII screens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engram.memory.gate.librarian import LibrarianGate
    from engram.memory.gate.requests import GateRequest, GateResult, WriteOutcome

__all__ = ["GateRequest", "GateResult", "LibrarianGate", "WriteOutcome"]


def __getattr__(name: str) -> Any:
    if name == "LibrarianGate":
        from engram.memory.gate.librarian import LibrarianGate  # noqa: PLC0415

        return LibrarianGate
    if name in {"GateRequest", "GateResult", "WriteOutcome"}:
        from engram.memory.gate import requests  # noqa: PLC0415

        return getattr(requests, name)
    raise AttributeError(f"module 'engram.memory.gate' has no attribute {name!r}")
