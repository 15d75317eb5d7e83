"""Hostile pass V: probes that held (the attack and what was checked), kept as regression
tests. Real embedded PostgreSQL and the real embedding model, no mocks: a CLI process is
killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest

from engram import Kernel
from engram.memory.gate.pii import scan
from engram.memory.gate.pii.findings import PiiKind
from engram.memory.types import AccessLevel, MemoryStatus, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, LATE_ETL, head_of
from tests.integration.gate_helpers import holding_head, lock_waiters
from tests.integration.test_consolidation import _seed
from tests.integration.test_hostile_pass_p import slow_crafted
from tests.integration.twin_helpers import Store, differences, normalised, twin_a, twin_b

__all__ = ["twin_a", "twin_b"]

#: Pieces that fill the largest record an adapter accepts, aimed at the newest rules (access
#: codes, BitLocker keys, JWTs cut short, the SSN window, bank words, CJK keywords after a
#: particle, the numéro fiscal, Spanish pairs, order labels, the Arabic word for a password)
#: and at the fold (marks, joiners, directional marks, fullwidth and Arabic-Indic digits).
CRAFTED = (
    "garage keypad code is ",
    "parental-control PIN: ",
    "key safe code number - ",
    "door-code-",
    "123456-",
    "449086-",
    "eyJhbGciOiJIUzI1NiJ9.",
    "eyJhbGci….",
    "ssn social security 123 45 678 ",
    "bank account banco conta ",
    "のマイナンバー",
    "김민수의 주민등록번호",
    "numéro fiscal n° fiscal 30 ",
    "912 48 33 07 ",
    "12 ",
    "bestellnummer pedido guía 4155550132 ",
    "كلمة السر: ",
    "كَلِمَة ",
    "1\u0332",
    "e\u0301",
    "\u1107\u1175",
    "1\u200d",
    "\u200f1 ",
    "\uff11\uff12\uff13",  # fullwidth digits
    "٣٤٥ ",
    "a\u30421\u0431\u0301",  # Latin, kana, a digit, Cyrillic, a mark
    "seed=",
    "token:",
)


def test_the_newest_rules_cost_about_prose_on_the_largest_crafted_records() -> None:
    """Each crafted record of the largest size an adapter accepts (content 16,000
    characters, metadata 16 KiB) aimed at regex@6's rules and at the fold is screened in
    under ``CRAFTED_FLOOR_SECONDS`` or ten times prose of that size (measured at 0.01 to 0.3 s
    against 0.035 s for prose; on session 31's slower machine ``seed=``, the slowest, took
    0.43-0.64 s against 0.05 s)."""
    prose, slow = slow_crafted(CRAFTED)
    assert [] == slow, prose


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in text)


def _arabic_indic(text: str) -> str:
    return "".join(chr(ord(c) - 48 + 0x660) if c.isdigit() else c for c in text)


#: The newest rules' findings, each written plainly.
NEWEST = (
    ("The garage keypad code is 7741#.", PiiKind.SECRET_ASSIGNMENT),
    ("The parental-control PIN: 5820 on the TV.", PiiKind.SECRET_ASSIGNMENT),
    ("Recovery key 449086-275869-581053-145453-004422-697873-223652-314270", None),
    ("Employee social security number, on the onboarding form, is 123 45 6789", None),
    ("Mon numéro fiscal est 30 23 217 600 053", PiiKind.NATIONAL_ID),
    ("Mi teléfono es 612 48 33 07", PiiKind.PHONE),
    ("كلمة السر: Zx9#kLp2qR", PiiKind.SECRET_ASSIGNMENT),
    ("アイコのマイナンバー 123456789018", PiiKind.NATIONAL_ID),
)
DISGUISES = {
    "fullwidth digits": _fullwidth,
    "Arabic-Indic digits": _arabic_indic,
    "zero-width space between characters": "\u200b".join,
    "zero-width joiner after digits": lambda t: "".join(
        c + "\u200d" if c.isdigit() else c for c in t
    ),
    "right-to-left marks": lambda t: "\u200f" + t.replace(" ", " \u200f"),
    "no-break spaces": lambda t: t.replace(" ", "\u00a0"),
    "soft hyphens after digits": lambda t: "".join(c + "\u00ad" if c.isdigit() else c for c in t),
}


@pytest.mark.parametrize("disguise", sorted(DISGUISES))
@pytest.mark.parametrize(("text", "kind"), NEWEST)
def test_the_newest_rules_read_look_alike_digits_and_invisible_characters(
    text: str, kind: PiiKind | None, disguise: str
) -> None:
    """The newest rules' findings, written with fullwidth or Arabic-Indic digits, zero-width
    spaces or joiners, right-to-left marks, no-break spaces or soft hyphens, are found as
    written plainly (the fold reads them so)."""
    plain = {f.kind for f in scan(text)}
    assert plain
    assert kind is None or kind in plain
    assert plain <= {f.kind for f in scan(DISGUISES[disguise](text))}


#: Records above the agent level that share the agent level's rare words ("checkout-api",
#: "orders_daily", "v4.2.0"): as close to its topics as a writer can make them.
ABOVE = [
    "checkout-api p99 latency on the payment step paged again; rolled back to v4.2.0.",
    "Root cause for checkout-api: the connection pool capped at 20 in v4.3.0, again.",
    "The nightly orders_daily ETL finished late again at 06:45, past its 06:00 deadline.",
    "orders_daily ETL late again; checkout-api paged; v4.2.0 rollback at 02:31.",
] * 3


async def _readers_view(store: Store) -> list[object]:
    """What a standard agent (cleared to ``user``) lists and recalls after the pass."""
    reader = store.principals["reader"]
    transcript: list[object] = []
    for tool, arguments in (
        ("list", {"limit": 100}),
        ("recall", {"query": "checkout-api incident root cause"}),
        ("recall", {"query": "orders_daily ETL late"}),
    ):
        answer = await store.tools.call(tool, arguments, reader)
        assert not answer.is_error, answer.structured_content
        body = dict(answer.structured_content or {})
        if "records" in body:  # summaries of one batch share an instant: listed in any order
            body["records"] = sorted(body["records"], key=lambda r: (r["type"], r["content"]))
        transcript.append(body)
    return transcript


async def test_a_levels_summaries_are_the_same_whatever_records_above_it_share_its_words(
    twin_a: Store, twin_b: Store
) -> None:
    """Two stores hold the same agent-level topics (an incident thread, a late ETL); one also
    holds a dozen ``sensitive`` records written to share their rarest words and to sit in
    their topics. After a deep pass, a reader cleared to ``user`` lists and recalls the same
    summaries, texts, metadata, source counts and ids (numbered by first appearance) in both:
    the records above its level shaped neither the topics (their word weights are computed
    per level), nor the summaries, nor what it is told."""
    for store in (twin_a, twin_b):
        await store.agent("reader", TrustLevel.STANDARD)
        await _seed(store.kernel, INCIDENT + LATE_ETL, DAY, access_level=AccessLevel.AGENT)
    await _seed(twin_b.kernel, ABOVE, DAY + timedelta(hours=1), access_level=AccessLevel.SENSITIVE)
    reports = [await store.kernel.consolidation.run(DEEP) for store in (twin_a, twin_b)]
    agent_items = [
        sorted(
            len(item.sources)
            for b in report.batches
            if b.level is AccessLevel.AGENT
            for item in b.items
        )
        for report in reports
    ]
    assert agent_items[0], agent_items
    assert agent_items[0] == agent_items[1]
    assert any(b.items for b in reports[1].batches if b.level is AccessLevel.SENSITIVE)
    views = [normalised(await _readers_view(store)) for store in (twin_a, twin_b)]
    assert [] == differences(*views)


#: ``engram`` as the installed script runs it (the environment names the test's database).
ENGRAM = (sys.executable, "-m", "engram.protocols.cli")


async def test_engram_consolidate_killed_mid_batch_leaves_nothing_and_the_next_pass_finishes(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """``engram consolidate`` is killed with SIGKILL while its batch, planned and screened,
    waits inside its transaction for a source's row lock: once the lock is let go nothing of
    the batch is written (no summary, no consolidated version, no batch row, no audit row of
    it), every source is still active at version 1, the audit chain verifies and the state
    rebuilt from it equals the store; the next pass consolidates every source exactly once."""
    ids = await _seed(kernel, INCIDENT + LATE_ETL, DAY, access_level=AccessLevel.AGENT)
    audited = len(await kernel.audit.search(limit=1000))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATABASE_URL=database.runtime_url, ENGRAM_MIGRATE_ON_START="false")
    async with holding_head(database.admin_url, min(ids)) as held:
        process = await asyncio.create_subprocess_exec(
            *ENGRAM,
            "consolidate",
            "--json",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await lock_waiters(held.watch, 1)
        finally:
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
        assert -signal.SIGKILL == process.returncode
        await held.release()
    for _ in range(200):  # the killed client's backends end once they read its socket
        busy = await kernel.db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()"
        )
        if not busy:
            break
        await asyncio.sleep(0.05)
    assert 0 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE consolidation_path = 'slow'"
    )
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM consolidation_batches")
    assert audited == len(await kernel.audit.search(limit=1000))
    for record_id in ids:
        head = await head_of(kernel, record_id)
        assert (MemoryStatus.ACTIVE, 1) == (head.status, head.version)
    assert (await kernel.audit.verify()).ok
    report = await kernel.consolidation.run(DEEP)
    consumed = [
        source for batch in report.batches for item in batch.items for source in item.sources
    ]
    assert sorted(ids) == sorted(consumed), report.skipped
    for record_id in ids:
        assert MemoryStatus.CONSOLIDATED is (await head_of(kernel, record_id)).status
    assert (await kernel.audit.verify()).ok
