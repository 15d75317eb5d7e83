"""Hostile pass W: self-healing, the scheduler, the advisor's learning path and the
notifications, across trust tiers (a finding that no longer fits a record's metadata, ...).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_w_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks.
"""

from __future__ import annotations

import json
from typing import Any

from engram import Kernel
from engram.memory.schemas import MAX_METADATA_BYTES
from engram.memory.types import AccessLevel
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import INTERN, WRITER, belief
from tests.integration.test_self_healing import MARKER, assert_flagged, rescan, write


def filled(**metadata: Any) -> dict[str, Any]:
    """``metadata`` with a ``notes`` entry that fills it to exactly the size limit."""
    metadata["notes"] = ""
    room = MAX_METADATA_BYTES - len(json.dumps(metadata, ensure_ascii=False).encode())
    metadata["notes"] = "n" * room
    assert MAX_METADATA_BYTES == len(json.dumps(metadata, ensure_ascii=False).encode())
    return metadata


async def test_a_finding_is_recorded_on_a_record_whose_metadata_is_full(kernel: Kernel) -> None:
    """High. The rescan raises a record to ``sensitive`` with its finding in
    ``metadata.pii``, a self-healing UPDATE the Gate's schema check measured like a
    writer's: a record whose writer filled its metadata to the 16 KiB limit could not take
    the finding, the UPDATE was rejected for size, counted refused and marked read, and the
    record (and a record citing it, filled the same way) stayed readable at ``agent`` for
    good: the compensating control after a detector upgrade was off for anyone padding
    their metadata. An internal write's size limit no longer counts the kernel's own
    finding; the rest of the metadata passed the limit when it was written."""
    text = f"The {MARKER} launch moves to the spring offsite in Lisbon."
    source = await write(kernel, belief(text, metadata=filled(team="growth")))
    citing = await write(
        kernel,
        belief(
            "The spring offsite needs a larger venue this year.",
            evidence_links=[source],
            metadata=filled(),
        ),
    )

    report = await rescan(kernel).run()

    assert (report.flagged, report.propagated, report.refused) == (1, 1, 0)
    assert_flagged(await head_of(kernel, source))
    assert_flagged(await head_of(kernel, citing), propagated_from=source)
    for reader in (INTERN, WRITER):
        for record_id in (source, citing):
            assert [] == await kernel.temporal.query(record_id=record_id, caller=reader)
