"""The Librarian Gate: the only way anything reaches memory storage.

Requests and results (``requests``), Layer 1's checks (``checks``: schema, ``access``, ``pii``,
``rate_limit``, classification), Layer 2's advisor (``advisor``), the write transaction
(``write_path``), conflict resolution (``resolution``), signals (metrics and logs) and the
Gate itself (``librarian``). ADR-008 has the rules.
"""

from engram.memory.gate.librarian import LibrarianGate
from engram.memory.gate.requests import GateRequest, GateResult, WriteOutcome

__all__ = ["GateRequest", "GateResult", "LibrarianGate", "WriteOutcome"]
