"""What the admin commands show of content the PII check flagged: nothing, unless asked.

Quarantined content is kept (an admin may release it), but listing the quarantine or exporting
the audit log must not print it by default: those outputs end up in terminals, tickets and
backups. :func:`redact_record` and :func:`redact_audit_row` replace every ``content`` with
``None`` and mark the result ``"redacted": true``; the finding kinds stay visible. An admin
who needs the text asks with ``--reveal``, which :meth:`QuarantineDesk.reveal` audits.

An audit row is redacted when its own PII check found something (the write was quarantined
or refused) or when it concerns a record that has a PII finding in any version. A redacted
row keeps its hashes, so the export still shows the chain; its content hash can only be
recomputed from an export made with ``--reveal``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any
from uuid import UUID

REDACTED = "redacted"


def _strip(value: Any) -> Any:
    """``value`` with every ``content`` key (at any depth) set to ``None``."""
    if isinstance(value, Mapping):
        return {key: None if key == "content" else _strip(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_strip(inner) for inner in value]
    return value


def redact_record(view: Mapping[str, Any]) -> dict[str, Any]:
    """A record's JSON view without its content."""
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
    """``row`` as an export shows it by default: without content when it holds PII."""
    record_id = row.get("record_id")
    concerned = record_id is not None and UUID(str(record_id)) in flagged
    if not (concerned or pii_flagged(row)):
        return dict(row)
    return {**row, "input_snapshot": _strip(row.get("input_snapshot")), REDACTED: True}
