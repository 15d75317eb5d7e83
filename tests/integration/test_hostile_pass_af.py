"""Hostile pass AF: integrity gaps earlier passes found and left open.

Every test here failed on the code it was written against. Real embedded PostgreSQL, the real
embedding model, real concurrent transactions (a second session holding a lock), no mocks.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import replace
from typing import Any

import anyio
import pytest

from engram import Kernel
from engram.errors import AlreadyExists, NotFound, Unauthenticated, ValidationFailed
from engram.memory import store
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateDecisionType,
    TrustLevel,
    WriteOutcome,
)
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.audit_helpers import entry
from tests.integration.gate_helpers import (
    BOSS,
    INTERN,
    WRITER,
    belief,
    create,
    holding_head,
    lock_waiters,
    update,
)
from tests.integration.test_hostile_pass_ac import _lock_waiters
from tests.integration.test_hostile_pass_l import _cli
from tests.integration.test_http_api import Api, assert_problem

api = http_api.api

# --- AF1: the quarantine list paged by ingestion time ----------------------------------------


async def _quarantine_page(api: Api, **params: Any) -> tuple[list[str], Any]:
    """One page of ``GET /v1/quarantine``: the record ids listed and ``next_cursor``."""
    page = await api.client.get("/v1/quarantine", params=params, headers=api.admin)
    assert 200 == page.status_code, page.text
    body = page.json()
    return [r["record_id"] for r in body["records"]], body["next_cursor"]


async def test_a_quarantined_write_still_waiting_when_a_page_is_read_is_on_a_later_page(
    api: Api, database: ScratchDatabase
) -> None:
    """High. ``GET /v1/quarantine`` paged by ingestion time, which a write takes when its
    transaction starts: an update that quarantines a record, waiting on a lock another
    session held, took an instant before two quarantined records written meanwhile; a page
    listed the first of them, the update then committed, and the next page, after that
    cursor, listed only the second: the update stayed quarantined where no admin following
    ``next_cursor`` would see it. The list now pages by its decisions' audit ``seq``."""
    kernel = api.kernel
    plain = await kernel.gate.evaluate(
        create(belief("The on-call rota for the billing team lives in the ops wiki."), WRITER)
    )
    assert plain.outcome is WriteOutcome.CREATED, plain.reason
    assert plain.record_id is not None
    quick: list[str] = []
    with anyio.fail_after(60):
        async with holding_head(database.admin_url, plain.record_id) as lock:
            slow = asyncio.ensure_future(
                kernel.gate.evaluate(
                    update(
                        plain.record_id,
                        "The billing on-call lead is reachable at dana.moss@example.com.",
                        1,
                        WRITER,
                    )
                )
            )
            await lock_waiters(lock.watch, 1)  # its transaction has begun, and waits
            for who in ("eli.park@example.com", "fay.lund@example.com"):
                made = await kernel.gate.evaluate(
                    create(belief(f"Payroll questions for this quarter go to {who}."), WRITER)
                )
                assert made.modified_record is not None, made.reason
                assert AccessLevel.SENSITIVE is made.modified_record.access_level
                quick.append(str(made.record_id))
            listed, cursor = await _quarantine_page(api, limit=1)
            assert quick[:1] == listed
            await lock.release()
            held = await slow
        assert held.modified_record is not None, held.reason
        assert AccessLevel.SENSITIVE is held.modified_record.access_level
        while cursor is not None:
            more, cursor = await _quarantine_page(api, limit=1, cursor=cursor)
            listed += more
    assert sorted([*quick, str(plain.record_id)]) == sorted(listed)


async def _quarantined_by_hand(kernel: Kernel, conn: Any, n: int, *, lane: int) -> int:
    """A quarantined version and its audit row, written in ``conn``'s transaction as the Gate
    writes them (the version first, the audit row last, on ``lane``); the row's seq."""
    decision_id = uuid.UUID(int=uuid.uuid4().int // 16 * 16 + lane)
    version = await store.insert_version(
        conn,
        belief(
            f"Contractor number {n} is reachable at contractor{n}@example.com.",
            access_level=AccessLevel.SENSITIVE,
            metadata={"pii": {"kinds": ["email"]}},
        ),
        decision_id=decision_id,
        decision_type=GateDecisionType.EXTERNAL,
        content_hash=uuid.uuid4().bytes * 2,
        importance=0.5,
        embedding=None,
        embedding_model=None,
    )
    row = replace(
        entry(n, lane=lane),
        decision_id=decision_id,
        action="CREATE",
        decision="approved",
        outcome="created",
        record_id=version.record_id,
        version_id=version.id,
    )
    return await kernel.audit.append(conn, row)


async def test_a_quarantine_page_never_passes_a_decision_still_being_committed(api: Api) -> None:
    """A quarantined write draws its decision's seq before it commits: ordered by seq alone,
    a page read meanwhile listed a later decision of another lane, and the next page, after
    that cursor, never listed the earlier one. A page now waits for the appends under way and
    ends at the last settled seq, as an audit page does."""
    kernel = api.kernel
    held = asyncio.Event()
    release = asyncio.Event()
    seqs: dict[str, int] = {}

    async def slow_commit() -> None:
        async with kernel.db.transaction() as conn:
            seqs["slow"] = await _quarantined_by_hand(kernel, conn, 1, lane=3)
            held.set()
            await release.wait()  # the transaction commits only now

    with anyio.fail_after(60):
        committing = asyncio.ensure_future(slow_commit())
        await held.wait()
        for n, lane in ((2, 4), (3, 5)):
            async with kernel.db.transaction() as conn:
                seqs[f"quick{n}"] = await _quarantined_by_hand(kernel, conn, n, lane=lane)
        assert seqs["slow"] < seqs["quick2"] < seqs["quick3"]
        first = asyncio.ensure_future(_quarantine_page(api, limit=1))
        while not first.done() and await _lock_waiters(kernel) == 0:
            await asyncio.wait({first}, timeout=0.02)  # until the page waits, or is answered
        release.set()
        await committing
        listed, cursor = await first
        while cursor is not None:
            more, cursor = await _quarantine_page(api, limit=1, cursor=cursor)
            listed += more
    assert 3 == len(set(listed)), (seqs, listed)


async def test_a_cursor_of_the_old_format_is_a_422_naming_the_change(api: Api) -> None:
    """An ingestion time, the quarantine list's cursor before it paged by seq, is refused
    (422 ``stale-cursor``, saying to list again without one) rather than read as a place in
    the new order; other text that is no seq is a 422 too, and never a 500."""
    await api.write(
        {"type": "belief", "content": "Escalations go to gil.ortiz@example.com."}, api.admin
    )
    stale = await api.client.get(
        "/v1/quarantine",
        params={"cursor": "2026-11-29T09:30:00.123456+00:00"},
        headers=api.admin,
    )
    body = assert_problem(stale, 422)
    assert "urn:engram:problem:stale-cursor" == body["type"]
    assert "without a cursor" in body["detail"]
    for odd in ("-1", "1.5", "9223372036854775808", "\u0661", "abc", " ", "1e3"):
        refused = await api.client.get("/v1/quarantine", params={"cursor": odd}, headers=api.admin)
        problem = assert_problem(refused, 422)
        assert "urn:engram:problem:validation-failed" == problem["type"], odd
    listed, cursor = await _quarantine_page(api, cursor="0")
    assert (1, None) == (len(listed), cursor)


async def test_the_cli_list_pages_by_seq_and_refuses_an_old_cursor(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """``engram quarantine list`` shows a page and names the ``--cursor`` of the next on
    stderr; that cursor lists the rest; an ingestion time given as ``--cursor`` (the list's
    old cursor) exits 2 saying to list again without one, with nothing on stdout."""
    made = []
    for who in ("hal.berg@example.com", "ida.voss@example.com"):
        result = await kernel.gate.evaluate(
            create(belief(f"Vendor invoices for this region go to {who}."), WRITER)
        )
        assert result.modified_record is not None, result.reason
        made.append(str(result.record_id))
    first = await asyncio.to_thread(_cli, database, "quarantine", "list", "--limit", "1", "--json")
    assert 0 == first.returncode, first.stderr
    [cursor] = re.findall(r"--cursor (\d+)", first.stderr)
    rest = await asyncio.to_thread(
        _cli, database, "quarantine", "list", "--cursor", cursor, "--json"
    )
    assert 0 == rest.returncode, rest.stderr
    assert "--cursor" not in rest.stderr
    listed = [json.loads(line)["record_id"] for line in (first.stdout + rest.stdout).splitlines()]
    assert made == listed
    stale = await asyncio.to_thread(
        _cli, database, "quarantine", "list", "--cursor", "2026-11-29T09:30:00+00:00"
    )
    assert (2, "") == (stale.returncode, stale.stdout), stale.stderr
    assert "without a cursor" in stale.stderr


# --- AF2: agent names that differ only in case -----------------------------------------------


async def test_a_name_differing_only_in_case_is_refused_as_a_duplicate_is(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """High. ``LOCAL`` could be registered beside ``local``: two agents that read as one in
    every audit row, listing and log line, so the admin's own name could be worn by a new
    agent of any tier. A name that differs from a registered one only in case is now refused
    as an exact duplicate is (``AlreadyExists``; exit 4 on the command line), naming the
    agent that holds it, revoked agents included."""
    assert await kernel.agents.ensure_first_agent() is not None  # "local", the admin
    await kernel.agents.add("ops-bot", TrustLevel.STANDARD)
    revoked, _ = await kernel.agents.add("Night.Shift", TrustLevel.RESTRICTED)
    await kernel.agents.revoke(revoked.name)
    for name, holder in (("local", "local"), ("LOCAL", "local"), ("Ops-Bot", "ops-bot")):
        with pytest.raises(AlreadyExists, match=re.escape(f"'{holder}'")):
            await kernel.agents.add(name, TrustLevel.TRUSTED, admin=True)
    with pytest.raises(AlreadyExists, match=re.escape("'Night.Shift'")):
        await kernel.agents.add("night.shift", TrustLevel.TRUSTED)
    taken = await asyncio.to_thread(_cli, database, "agents", "add", "LoCaL", "--trust", "trusted")
    assert (4, "") == (taken.returncode, taken.stdout), taken.stderr
    assert "'local'" in taken.stderr
    names = sorted(agent.name for agent in await kernel.agents.list_agents())
    assert ["Night.Shift", "local", "ops-bot"] == names


async def test_the_agent_commands_find_an_agent_by_its_name_in_any_case(kernel: Kernel) -> None:
    """Names are one agent's whatever their case, so the commands that name an agent
    (``get``, ``rotate``, ``revoke``) find it in any case and answer with its own spelling;
    before, ``LOCAL`` was refused at ``add`` as taken but ``revoke LOCAL`` said no agent."""
    agent, token = await kernel.agents.add("Planner", TrustLevel.STANDARD)
    assert agent.id == (await kernel.agents.get("PLANNER")).id
    rotated, new_token = await kernel.agents.rotate("planner")
    assert (agent.id, "Planner") == (rotated.id, rotated.name)
    with pytest.raises(Unauthenticated):
        await kernel.agents.authenticate(token)
    principal = await kernel.agents.authenticate(new_token)
    assert "Planner" == principal.caller.agent_id
    revoked = await kernel.agents.revoke("pLANNER")
    assert (agent.id, "Planner", False) == (revoked.id, revoked.name, revoked.active)
    with pytest.raises(NotFound):
        await kernel.agents.get("Planner2")


async def test_the_audit_filter_finds_an_agents_rows_by_its_name_in_any_case(api: Api) -> None:
    """``GET /v1/audit?agent=LOCAL`` listed nothing for the agent ``local`` though the
    registry takes ``LOCAL`` as that agent's name (refused at ``add``, found by ``revoke``):
    an admin looking into what it did was told it did nothing. The filter now matches the
    recorded identity whatever its case (more rows, never fewer)."""
    written = await api.write(
        {"type": "belief", "content": "The staging cluster is rebuilt every Sunday night."},
        api.admin,
    )
    assert 201 == written.status_code, written.text
    for spelling in ("local", "LOCAL", "Local"):
        page = await api.client.get("/v1/audit", params={"agent": spelling}, headers=api.admin)
        assert 200 == page.status_code, page.text
        rows = page.json()["entries"]
        assert [written.json()["decision_id"]] == [r["decision_id"] for r in rows], spelling


@pytest.mark.parametrize("name", ["local\n", "ops-bot\n", "x" * 64 + "\n"])
async def test_a_name_ending_in_a_newline_is_refused_as_invalid_not_as_a_database_failure(
    kernel: Kernel, database: ScratchDatabase, name: str
) -> None:
    """Found probing the agent commands. The name check's ``$`` also matches before a final
    newline, so ``engram agents add $'local\n'`` passed it and met the table's own check:
    exit 5 ("the database is failing; try again later") with PostgreSQL's message, which
    quoted the refused row (its token hash and token prefix included). It is now refused as
    any invalid name is (``ValidationFailed``, exit 4), and nothing is stored."""
    with pytest.raises(ValidationFailed, match="agent name"):
        await kernel.agents.add(name, TrustLevel.STANDARD)
    added = await asyncio.to_thread(_cli, database, "agents", "add", name, "--trust", "standard")
    assert (4, "") == (added.returncode, added.stdout), added.stderr
    assert "agents_name_check" not in added.stderr
    assert [] == await kernel.agents.list_agents()


@pytest.mark.parametrize("name", ["local\n", "a\x00b", "a\ud800", "", "x" * 65])
async def test_a_text_that_is_no_agent_name_names_no_agent(kernel: Kernel, name: str) -> None:
    """``get``, ``revoke`` and ``rotate`` sent a NUL or a lone surrogate to PostgreSQL, which
    refused it as a driver error (``DatabaseError``: a failing database, to the adapters);
    a text that cannot be an agent's name now names no agent (``NotFound``)."""
    await kernel.agents.add("local", TrustLevel.TRUSTED, admin=True)
    for look_up in (kernel.agents.get, kernel.agents.revoke, kernel.agents.rotate):
        with pytest.raises(NotFound):
            await look_up(name)
    assert [True] == [agent.active for agent in await kernel.agents.list_agents()]


# --- AF3: reads made while a record was hidden --------------------------------------------------

DRILL = "The qorvane backup drill runs every Tuesday at dawn."


async def _kept_then_lowered(kernel: Kernel, namespace: str, *, reads: int) -> uuid.UUID:
    """A record the trusted agent kept at ``sensitive``, read ``reads`` times there by it,
    then lowered to ``agent`` (a second version of the same text)."""
    kept = await kernel.gate.evaluate(
        create(
            belief(
                DRILL + " Owner: storage.",
                namespace=namespace,
                access_level=AccessLevel.SENSITIVE,
                source_agent=BOSS.agent_id,
            ),
            BOSS,
        )
    )
    assert kept.record_id is not None, kept.reason
    for _ in range(reads):
        assert await kernel.temporal.current(kept.record_id, caller=BOSS) is not None
    await kernel.temporal.flush_reads()
    lowered = await kernel.gate.evaluate(
        update(kept.record_id, DRILL, 1, BOSS, namespace=namespace, access_level=AccessLevel.AGENT)
    )
    assert lowered.outcome is WriteOutcome.UPDATED, lowered.reason
    return kept.record_id


async def _decay_seen_by(kernel: Kernel, caller: Any, record_id: uuid.UUID) -> float:
    """The stored decay score ``caller`` reads on ``record_id`` (not counted as a read), after
    checking it against the one computed on demand."""
    await kernel.temporal.refresh_decay()
    seen = await kernel.temporal.current(record_id, caller=caller, count_read=False)
    assert seen is not None
    assert await kernel.temporal.compute_decay(record_id) == pytest.approx(
        seen.decay_score, abs=0.01
    )
    return seen.decay_score


async def test_reads_made_while_a_record_was_hidden_do_not_lift_its_decay_for_later_readers(
    kernel: Kernel,
) -> None:
    """Medium. Reads were counted per record, whatever the level of the version read: a
    record kept at ``sensitive`` and read there by the trusted agent, then lowered to
    ``agent``, showed agent-level readers a ``decay_score`` lifted by reads none of them
    could have made (0.89 against 0.70 for the same record never read), telling them it had
    been in use where they could not see it. A reader's decay now counts only reads of
    versions at or below the record's current level; reads once it is lowered count as
    before."""
    unread = await _kept_then_lowered(kernel, "unread", reads=0)
    used = await _kept_then_lowered(kernel, "used", reads=12)
    scores = [await _decay_seen_by(kernel, INTERN, record) for record in (unread, used)]
    assert scores[1] == pytest.approx(scores[0], abs=0.01)
    for _ in range(3):  # reads at its new level count for its new readers
        assert await kernel.temporal.current(used, caller=INTERN) is not None
    await kernel.temporal.flush_reads()
    assert await _decay_seen_by(kernel, INTERN, used) > scores[0] + 0.05


async def held_and_read(kernel: Kernel, address: str) -> list[uuid.UUID]:
    """Two records quarantined at ``sensitive`` (an e-mail address in each), the first never
    read, the second read 12 times by the trusted agent while held; their ids."""
    held_ids = []
    for namespace, reads in (("unread", 0), ("used", 12)):
        held = await kernel.gate.evaluate(
            create(belief(f"{DRILL} Escalate to {address}.", namespace=namespace), BOSS)
        )
        assert held.modified_record is not None, held.reason
        assert AccessLevel.SENSITIVE is held.modified_record.access_level
        assert held.record_id is not None
        for _ in range(reads):
            assert await kernel.temporal.current(held.record_id, caller=BOSS) is not None
        await kernel.temporal.flush_reads()
        held_ids.append(held.record_id)
    return held_ids


async def test_reads_of_a_quarantined_record_do_not_lift_its_decay_once_released(
    kernel: Kernel,
) -> None:
    """The release lowers a quarantined record in place (the version stays, its level
    changes): reads made while it was held at ``sensitive`` (the trusted agent's, here) must
    not lift the decay its new agent-level readers see, any more than a lowering update's."""
    admin = CallerIdentity.system("cli:tester")
    released = await held_and_read(kernel, "ola.rand@example.com")
    for record_id in released:
        await kernel.quarantine.release(record_id, admin=admin, reason="a shared desk")
    scores = [await _decay_seen_by(kernel, INTERN, record) for record in released]
    assert scores[1] == pytest.approx(scores[0], abs=0.01)
