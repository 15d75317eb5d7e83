"""The in-process adapter (AgentSession) at the input boundary: odd input is an audited
rejection, and what the audit keeps of rejected input is JSON-safe and bounded."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from engram import Kernel
from engram.memory.gate.requests import GateResult
from engram.memory.types import GateDecision
from engram.protocols.inprocess import AgentSession
from tests.integration.gate_helpers import RESTRICTED, STANDARD
from tests.integration.odd_inputs import BASE, ODD_IDS, ODD_INPUTS, OddInput, nested

#: The documented bound of a rejected input's audited excerpt (docs/api.md).
AUDITED_EXCERPT_BYTES = 8 * 1024


async def _counts(kernel: Kernel) -> tuple[int, int]:
    """Audit rows and memory versions, in that order."""
    audit = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    versions = await kernel.db.fetchval("SELECT count(*) FROM memories")
    return int(audit), int(versions)


async def _snapshot(kernel: Kernel, result: GateResult) -> tuple[str, dict[str, Any]]:
    """The stored input snapshot of a decision: its text and the parsed ``raw`` member."""
    text = await kernel.db.fetchval(
        "SELECT input_snapshot::text FROM librarian_audit WHERE decision_id = $1",
        result.decision_id,
    )
    assert isinstance(text, str)
    raw: dict[str, Any] = json.loads(text)["raw"]
    return text, raw


def _schema_rejection(result: GateResult, field: str) -> None:
    """A rejection whose one failed check is the schema check, naming ``field``."""
    assert GateDecision.REJECTED == result.decision
    assert ["schema"] == [check.name for check in result.failed_checks]
    assert field in result.failed_checks[0].detail


@pytest.mark.parametrize("odd", ODD_INPUTS, ids=ODD_IDS)
async def test_odd_input_to_remember_is_rejected_and_audited_once(
    kernel: Kernel, odd: OddInput
) -> None:
    """remember() with a NUL, a lone surrogate, NaN, an instant beyond UTC or 900-deep metadata
    returns a REJECTED result naming the field; one audit row, nothing stored."""
    result = await AgentSession(kernel, RESTRICTED).remember(odd.body)
    _schema_rejection(result, odd.field)
    assert (1, 0) == await _counts(kernel)
    text, _ = await _snapshot(kernel, result)
    text.encode("utf-8")  # what the audit keeps is valid UTF-8, whatever came in
    assert "\x00" not in text
    assert (await kernel.audit.verify()).ok


@pytest.mark.parametrize("odd", ODD_INPUTS, ids=ODD_IDS)
async def test_odd_input_to_amend_is_rejected_and_audited_once(
    kernel: Kernel, odd: OddInput
) -> None:
    """amend() with the same values is rejected with one audit row and no new version."""
    session = AgentSession(kernel, STANDARD)
    created = await session.remember(BASE)
    assert created.record_id is not None
    result = await session.amend(created.record_id, odd.changes, expected_version=1)
    _schema_rejection(result, odd.field)
    assert (2, 1) == await _counts(kernel)


async def test_an_oversized_rejected_input_is_audited_as_an_excerpt_with_size_and_hash(
    kernel: Kernel,
) -> None:
    """A 10 MB proposal is refused; the audit keeps an 8 KiB excerpt, the size and the SHA-256
    of the input as JSON, not the 10 MB."""
    payload = {**BASE, "content": "The ledger " + "x" * 10_000_000}
    result = await AgentSession(kernel, STANDARD).remember(payload)
    _schema_rejection(result, "input")
    text, raw = await _snapshot(kernel, result)
    assert len(text.encode()) < AUDITED_EXCERPT_BYTES + 1024
    assert raw["truncated"] is True
    assert len(raw["excerpt"].encode()) <= AUDITED_EXCERPT_BYTES
    assert raw["excerpt"].startswith('{"content":"The ledger xxx')
    full = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    assert (len(full), hashlib.sha256(full).hexdigest()) == (raw["bytes"], raw["sha256"])
    assert (1, 0) == await _counts(kernel)


async def test_a_rejected_input_json_cannot_hold_is_audited_in_a_json_safe_form(
    kernel: Kernel,
) -> None:
    """Cycles, sets, bytes and 5000-deep nesting in an in-process payload are refused and
    audited with a stand-in for what JSON cannot hold, never a crash."""
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic
    payload = {
        **BASE,
        "metadata": {"cycle": cyclic, "set": {1, 2}, "blob": b"\x00\xff", "deep": nested(5000)},
        "unknown": object(),
    }
    result = await AgentSession(kernel, STANDARD).remember(payload)
    assert GateDecision.REJECTED == result.decision
    assert (1, 0) == await _counts(kernel)
    text, raw = await _snapshot(kernel, result)
    assert "metadata" in raw
    assert len(text) < 64 * 1024
    assert (await kernel.audit.verify()).ok


async def test_the_snapshot_of_a_clean_rejection_is_the_input_as_sent(kernel: Kernel) -> None:
    """Input needing no escaping is audited exactly as sent (the escaping changes nothing else)."""
    payload = {**BASE, "colour": "blue", "metadata": {"tags": ["a", "b"], "n": 1.5}}
    result = await AgentSession(kernel, STANDARD).remember(payload)
    assert GateDecision.REJECTED == result.decision
    _, raw = await _snapshot(kernel, result)
    assert payload == raw


async def test_a_huge_integer_in_metadata_is_rejected_and_audited_by_its_size(
    kernel: Kernel,
) -> None:
    """An integer Python will not write as text (over 4,300 digits): a REJECTED result, one
    audit row whose snapshot records the integer by its size, nothing stored."""
    result = await AgentSession(kernel, STANDARD).remember({**BASE, "metadata": {"n": 10**5000}})
    _schema_rejection(result, "metadata")
    assert (1, 0) == await _counts(kernel)
    text = await kernel.db.fetchval(
        "SELECT input_snapshot::text FROM librarian_audit WHERE decision_id = $1",
        result.decision_id,
    )
    assert "<integer of 16610 bits>" in text
    assert (await kernel.audit.verify()).ok


@pytest.mark.parametrize(
    "payload", [None, "a belief", [("type", "belief")], 42], ids=["none", "str", "pairs", "int"]
)
async def test_a_payload_that_is_not_a_mapping_is_rejected_and_audited(
    kernel: Kernel, payload: Any
) -> None:
    """remember() and amend() with a payload of the wrong Python type answer with a
    REJECTED result naming it (no TypeError), audited once each."""
    session = AgentSession(kernel, STANDARD)
    created = await session.remember(BASE)
    assert created.record_id is not None
    made = await session.remember(payload)
    _schema_rejection(made, "payload")
    changed = await session.amend(created.record_id, payload, expected_version=1)
    _schema_rejection(changed, "payload")
    assert (3, 1) == await _counts(kernel)


@pytest.mark.parametrize(
    "version",
    [10**5000, 0, -1, 2**31, True, 1.5, "1"],
    ids=["5000-digits", "zero", "negative", "2**31", "bool", "float", "text"],
)
async def test_an_expected_version_out_of_range_is_rejected_and_audited(
    kernel: Kernel, version: Any
) -> None:
    """An expected version that is not an integer from 1 to 2**31 - 1 (a 5,000-digit one
    included) is a REJECTED result for update, amend and forget, each audited once."""
    session = AgentSession(kernel, STANDARD)
    created = await session.remember(BASE)
    assert created.record_id is not None
    rid = created.record_id
    for result in (
        await session.update(rid, BASE, expected_version=version),
        await session.amend(
            rid, {"content": BASE["content"] + " Moved."}, expected_version=version
        ),
        await session.forget(rid, expected_version=version),
    ):
        _schema_rejection(result, "expected_version")
    assert (4, 1) == await _counts(kernel)
