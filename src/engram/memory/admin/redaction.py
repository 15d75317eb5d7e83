"""What the admin commands show of content the PII check flagged: nothing, unless asked.

Quarantined content is kept (an admin may release it), but listing the quarantine or exporting
the audit log must not print it by default: those outputs end up in terminals, tickets and
backups. :func:`redact_record` and :func:`redact_audit_row` replace every ``content`` with
``None``, keep of ``metadata`` only the finding (the screen reads metadata as well), keep of a
raw refused input only its size and digest, and mark the result ``"redacted": true``. An admin
who needs the text asks with ``--reveal``, which :meth:`QuarantineDesk.reveal` audits.

An audit row is redacted when its own PII check found something (the write was quarantined
or refused), when it concerns a record that has a PII finding in any version, or when it holds
raw input refused before any screening (malformed requests are never screened). A redacted
row keeps its hashes, so the export still shows the chain; its content hash can only be
recomputed from an export made with ``--reveal``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any
from uuid import UUID

REDACTED = "redacted"


#: What of a raw (refused, never screened) input may be shown: its size and digest.
_RAW_KEPT = ("bytes", "sha256", "truncated")


def _strip(value: Any) -> Any:
    """``value`` without what may hold personal data, at any depth: every ``content`` is
    ``None``; every ``metadata`` keeps only its ``pii`` finding (the screen reads metadata
    too); a raw input keeps only its size and digest (it was never screened, and an excerpt
    of it is text like any other)."""
    if isinstance(value, Mapping):
        kept: dict[str, Any] = {}
        for key, inner in value.items():
            if key in {"content", "excerpt"}:
                kept[key] = None
            elif key == "metadata":
                finding = inner.get("pii") if isinstance(inner, Mapping) else None
                kept[key] = {} if finding is None else {"pii": finding}
            elif key == "raw":
                kept[key] = (
                    {k: inner[k] for k in _RAW_KEPT if k in inner}
                    if isinstance(inner, Mapping)
                    else None
                )
            else:
                kept[key] = _strip(inner)
        return kept
    if isinstance(value, list):
        return [_strip(inner) for inner in value]
    return value


def redact_record(view: Mapping[str, Any]) -> dict[str, Any]:
    """A record's JSON view without its content or metadata (the finding kinds stay)."""
    return {**_strip(view), REDACTED: True}


def pii_flagged(row: Mapping[str, Any]) -> bool:
    """Whether an audit row's own PII check found something."""
    checks = row.get("layer1_checks") or []
    return any(
        isinstance(check, Mapping)
        and check.get("name") == "pii"
        and (check.get("quarantined") or check.get("passed") is False)
        for check in checks
    )


def redact_audit_row(row: Mapping[str, Any], flagged: Collection[UUID]) -> dict[str, Any]:
    """``row`` as an export shows it by default: without what may be personal data when it
    concerns a flagged record, when its own PII check found something, or when it holds a
    raw input that was refused before any screening."""
    record_id = row.get("record_id")
    concerned = record_id is not None and UUID(str(record_id)) in flagged
    snapshot = row.get("input_snapshot")
    unscreened = isinstance(snapshot, Mapping) and "raw" in snapshot
    if not (concerned or unscreened or pii_flagged(row)):
        return dict(row)
    return {**row, "input_snapshot": _strip(snapshot), REDACTED: True}
