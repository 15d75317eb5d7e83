"""The quarantine list while a listed record takes new versions (real sessions, no fakes).

A page read the settled seq in one transaction and the quarantined heads in a statement of
its own. A new version of a listed record committing between the two (still quarantined, its
decision's seq past the settled one) ended the version the page would have listed and was
itself past the page: the record was on no page, and the page said nothing followed. Seen in
a CI run, where a conflict step rewrote quarantined records while an admin listed them. The
page now reads both while it holds the audit lanes, so no decision commits in between."""

from __future__ import annotations

import asyncio

from engram import Kernel
from engram.memory.types import TrustLevel
from engram.protocols.inprocess import AgentSession

ROUNDS = 150


async def test_a_record_rewritten_while_the_list_is_read_is_on_every_page(
    kernel: Kernel,
) -> None:
    """One writer gives a quarantined record a new version after another (its metadata; the
    content keeps it quarantined); a reader lists the quarantine again and again. Every
    listing holds the record, at its head of that moment."""
    _, token = await kernel.agents.add("rota", TrustLevel.TRUSTED, writes_per_minute=100_000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    text = "The weekend rota is sent from rota.lead@example.org each Friday."
    made = await session.remember({"type": "belief", "content": text})
    assert made.record_id is not None, made.reason
    record_id = made.record_id
    done = asyncio.Event()
    versions = 1

    async def rewrite() -> None:
        nonlocal versions
        try:
            for n in range(ROUNDS):
                changed = await session.update(
                    record_id,
                    {"type": "belief", "content": text, "metadata": {"round": n}},
                    expected_version=versions,
                )
                stored = changed.modified_record
                assert changed.version is not None, changed.reason
                assert stored is not None, changed.reason
                assert stored.access_level.value == "sensitive"
                versions = changed.version
        finally:
            done.set()

    missing: list[int] = []
    listings = 0

    async def list_again() -> None:
        nonlocal listings
        while not done.is_set():
            page = await kernel.quarantine.pending(limit=10)
            listings += 1
            if record_id not in {r.record_id for r in page.records}:
                missing.append(listings)
            await asyncio.sleep(0)

    await asyncio.gather(rewrite(), list_again(), list_again())
    assert versions == ROUNDS + 1
    assert listings > ROUNDS // 2, listings
    assert missing == [], f"absent from {len(missing)} of {listings} listings"
