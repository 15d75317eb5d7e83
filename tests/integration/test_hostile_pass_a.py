"""Hostile pass A: what a record a caller may not read still changes in what it gets back.

Each test states the rule (nothing a caller may not read may influence its answer) for one
less-travelled path, and fails on the code as it stands. Real embedded PostgreSQL, no mocks.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID

from engram import Kernel
from engram.memory.types import AccessLevel, GateDecision, MemoryStatus
from engram.protocols.mcp.tools import EngramTools
from engram.protocols.views import feedback_view
from tests.integration.gate_helpers import BOSS, FAST, INTERN, WRITER, belief, create, update
from tests.integration.test_gate_access_isolation import SECRET, _approved, _sensitive

# --- 1. evidence_links name hidden records ------------------------------------------------


async def test_evidence_links_of_a_readable_record_do_not_name_a_hidden_record(
    kernel: Kernel,
) -> None:
    """A trusted agent writes an agent-level belief citing a sensitive record as evidence.
    Every reader of the agent-level record would get the sensitive record's id in
    ``evidence_links`` (temporal reads, MCP get/list/recall, search), so the Gate refuses the
    citation, with the reason and an audit row, and stores nothing."""
    hidden = await _sensitive(kernel, SECRET)
    citing = belief(
        "The payments outage had a dedicated incident bridge.",
        source_agent=BOSS.agent_id,
        access_level=AccessLevel.AGENT,
        evidence_links=[hidden],
    )
    refused = await kernel.gate.evaluate(create(citing, BOSS))
    assert GateDecision.REJECTED == refused.decision
    assert f"record {hidden} is above this record's access level (agent)" in refused.reason
    assert refused.record_id is None or not await kernel.temporal.get_version_chain(
        refused.record_id, caller=BOSS
    )
    entry = await kernel.audit.by_decision(refused.decision_id)
    assert entry is not None
    assert "rejected" == entry.decision
    # Cited at its own level it is accepted, and the readers of that level may read it.
    same_level = await _approved(
        kernel,
        create(
            belief(
                "The payments outage bridge was booked by the trusted agent.",
                source_agent=BOSS.agent_id,
                access_level=AccessLevel.SENSITIVE,
                evidence_links=[hidden],
            ),
            BOSS,
        ),
    )
    assert same_level.record_id is not None
    # A restricted caller citing it is told only that no such record exists.
    unknown = await kernel.gate.evaluate(
        create(
            belief(
                "The outage had a bridge.", source_agent=INTERN.agent_id, evidence_links=[hidden]
            ),
            INTERN,
        )
    )
    assert GateDecision.REJECTED == unknown.decision
    assert f"evidence_links: no record {hidden}" in unknown.reason
    assert "access level" not in unknown.reason
    _, token = await kernel.agents.add("hostile-reader", INTERN.trust_level, writes_per_minute=FAST)
    principal = await kernel.agents.authenticate(token)
    listed = await EngramTools(kernel).call("list", {}, principal)
    assert str(hidden) not in json.dumps(listed.structured_content)


# --- 2. a conflict resolution changes a readable record on hidden grounds -----------------


async def test_a_contradiction_with_a_hidden_record_does_not_challenge_a_readable_one(
    kernel: Kernel,
) -> None:
    """A trusted agent holds a sensitive fact (JWT, observed); it then writes an agent-level
    belief contradicting it (session cookies, told with less confidence). The resolution marks
    *both* records challenged: the agent-level record gets a version 2 with status
    ``challenged``. A restricted reader, who cannot read the sensitive record, would see its
    record change status (and version) because of a record it may not read, whereas without
    the hidden record it reads version 1, active. A resolution restates the newer record only
    when its readers may read the older one."""
    await _sensitive(
        kernel,
        "The public API authenticates requests with JWT bearer tokens.",
        source_confidence=0.9,
    )
    newer = await _approved(
        kernel,
        create(
            belief(
                "The public API authenticates requests with session cookies.",
                source_agent=BOSS.agent_id,
                access_level=AccessLevel.AGENT,
                source_confidence=0.5,
            ),
            BOSS,
        ),
    )
    assert newer.layer2_decision is not None
    # the conflict is found (the writer may read both), but it may not restate the newer
    assert ["contradiction"] == [c.classification.value for c in newer.layer2_decision.conflicts]
    await kernel.events.settled()
    assert newer.record_id is not None
    seen = await kernel.temporal.current(newer.record_id, caller=INTERN)
    assert seen is not None
    assert (1, MemoryStatus.ACTIVE) == (seen.version, seen.status), (
        "a readable record was restated as challenged on the grounds of a hidden one"
    )


async def test_an_escalated_conflict_with_a_hidden_record_does_not_challenge_a_readable_one(
    kernel: Kernel,
) -> None:
    """The same through the escalation branch: a standard agent's agent-level v2.1 beside a
    trusted agent's *user*-level v2.0 (which the standard agent reads, a restricted agent does
    not). The standard agent may not retire the trusted record, so the resolution escalates and
    marks the standard agent's own record challenged; the restricted reader sees that agent-
    level record challenged (v2) for a reason it may not read."""
    await _approved(
        kernel,
        create(
            belief(
                "The deploy target for the web app is v2.0.",
                source_agent=BOSS.agent_id,
                access_level=AccessLevel.USER,
                event_time=datetime(2025, 3, 1, 9, tzinfo=UTC),
            ),
            BOSS,
        ),
    )
    newer = await _approved(
        kernel,
        create(
            belief(
                "The deploy target for the web app is v2.1.",
                source_agent=WRITER.agent_id,
                access_level=AccessLevel.AGENT,
                event_time=datetime(2025, 4, 10, 9, tzinfo=UTC),
            ),
            WRITER,
        ),
    )
    assert newer.layer2_decision is not None
    assert newer.layer2_decision.conflicts, "the standard writer saw the user-level record"
    await kernel.events.settled()
    assert newer.record_id is not None
    seen = await kernel.temporal.current(newer.record_id, caller=INTERN)
    assert seen is not None
    assert (1, MemoryStatus.ACTIVE) == (seen.version, seen.status), (
        "an agent-level record was challenged because of a user-level record its reader "
        "may not read"
    )


# --- 3. a hidden duplicate swallows a trusted writer's lower-level fact ------------------


async def test_a_hidden_duplicate_does_not_swallow_a_readable_write(kernel: Kernel) -> None:
    """The trusted agent keeps a sensitive note; it then publishes the same sentence at the
    agent level for everyone. Layer 2 looks for duplicates among every level the *writer*
    reads, finds the sensitive record and answers NOOP (reinforced): no agent-level record is
    stored, so an agent-level reader finds nothing, whereas without the hidden note it would
    find the published fact. What readers of a level get depends on a record above it."""
    hidden = await _sensitive(kernel, SECRET)
    published = await _approved(
        kernel,
        create(belief(SECRET, source_agent=BOSS.agent_id, access_level=AccessLevel.AGENT), BOSS),
    )
    assert published.record_id is not None
    found = await kernel.retrieval.search(INTERN, "incident bridge for the payments outage")
    assert published.record_id != hidden, (
        f"outcome {published.outcome.value}: the agent-level write was merged into the hidden one"
    )
    assert [published.record_id] == [hit.record.record_id for hit in found.hits]


# --- 4. importance (shown as decay_score) is computed against hidden neighbours ---------


async def test_decay_score_of_a_readable_record_does_not_depend_on_a_hidden_neighbour(
    kernel: Kernel,
) -> None:
    """Layer 2's importance uses novelty = 1 - similarity to the nearest record the writer
    reads. For a trusted writer that includes sensitive records, and importance drives the
    ``decay_score`` every reader sees after ``decay_refresh``. Two identical agent-level writes
    in two namespaces, one beside a similar sensitive record: a restricted reader sees two
    different decay scores, i.e. learns that a similar hidden record exists."""
    neighbour = "The payments team rotates its on-call engineer every Monday at nine."
    public = "The payments team hands over the on-call pager every Monday morning."
    await _sensitive(kernel, neighbour, namespace="with-hidden")
    ids = []
    for namespace in ("with-hidden", "without"):
        result = await _approved(
            kernel,
            create(
                belief(
                    public,
                    source_agent=BOSS.agent_id,
                    access_level=AccessLevel.AGENT,
                    namespace=namespace,
                ),
                BOSS,
            ),
        )
        assert "created" == result.outcome.value, result.reason
        ids.append(result.record_id)
    await kernel.temporal.refresh_decay()
    scores = []
    for record_id in ids:
        seen = await kernel.temporal.current(record_id, caller=INTERN)
        assert seen is not None
        scores.append(round(seen.decay_score, 3))
    assert scores[0] == scores[1], f"decay_score {scores}: a hidden neighbour moved it"


# --- 5. the feedback receipt id counts other agents' ratings of hidden records ----------


async def test_feedback_receipt_ids_do_not_count_ratings_of_hidden_records(
    kernel: Kernel,
) -> None:
    """``feedback`` returns the row's id from one global identity sequence. A restricted agent
    rating twice sees the gap between its ids grow by every rating other agents gave in
    between, ratings of records it may not read included: a counter of hidden activity."""
    hidden = await _sensitive(kernel, SECRET)
    visible = await _approved(
        kernel,
        create(
            belief(
                "The staging cluster runs in Frankfurt.",
                source_agent=INTERN.agent_id,
            ),
            INTERN,
        ),
    )
    assert visible.record_id is not None
    first = await kernel.retrieval.feedback(INTERN, visible.record_id, useful=True)
    for _ in range(3):
        await kernel.retrieval.feedback(BOSS, hidden, useful=True)
    second = await kernel.retrieval.feedback(INTERN, visible.record_id, useful=True)
    for receipt in (first, second):
        assert not hasattr(receipt, "id"), "the receipt carries the global rating sequence"
        assert "id" not in feedback_view(receipt)


# --- 6. history by the id of a hidden version is an existence oracle ------------------


async def test_history_by_the_id_of_a_hidden_version_answers_as_for_an_unknown_id(
    kernel: Kernel,
) -> None:
    """``get_version_chain`` (MCP ``history``, ``GET /v1/memories/{id}/versions``) also takes the
    id of one version. Given the id of a version the caller may not read (a sensitive v2 of a
    record whose v1 and v3 are agent-level), it answers with the record's chain (v1, v3)
    instead of "no record": the caller learns that this id exists, which record it belongs to
    and where it sits in the chain, while an unknown id is not_found."""
    first = await _approved(
        kernel,
        create(
            belief(
                "The release train leaves every second Tuesday.",
                source_agent=BOSS.agent_id,
                access_level=AccessLevel.AGENT,
            ),
            BOSS,
        ),
    )
    assert first.record_id is not None
    hidden_version = await _approved(
        kernel,
        update(
            first.record_id,
            "The release train leaves every second Tuesday; the freeze list is in vault 7.",
            1,
            BOSS,
            access_level=AccessLevel.SENSITIVE,
        ),
    )
    await _approved(
        kernel,
        update(
            first.record_id,
            "The release train leaves every second Tuesday at noon.",
            2,
            BOSS,
            access_level=AccessLevel.AGENT,
        ),
    )
    assert hidden_version.modified_record is not None
    hidden_id = hidden_version.modified_record.id
    _, token = await kernel.agents.add("hostile-hist", INTERN.trust_level, writes_per_minute=FAST)
    principal = await kernel.agents.authenticate(token)
    tools = EngramTools(kernel)
    unknown = await tools.call("history", {"record_id": str(UUID(int=7))}, principal)
    probed = await tools.call("history", {"record_id": str(hidden_id)}, principal)
    assert unknown.is_error
    assert probed.is_error, (
        "history of a hidden version's id answers with its record's chain: "
        f"{json.dumps(probed.structured_content)[:300]}"
    )
