"""Hostile pass Z: a consolidation pass's deadline against an outside summariser that answers
slowly, what else the summariser's calls and answers do to the kernel (its event loop, the
records it writes), and what records of a closed access level can change about when an
open level is consolidated.

Every test here failed on the code it was written against (each says what failed); what held
is in ``test_hostile_pass_z_held.py``. Real embedded PostgreSQL, the real embedding model, a
real loopback HTTP server as the outside summariser; no mocks."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from engram import Kernel
from engram.infra.llm import OpenAICompatibleGenerator
from engram.memory.consolidation import ConsolidationReport
from engram.memory.consolidation.candidates import PlannerSettings
from engram.memory.consolidation.watch import ConsolidationWatch
from engram.memory.types import AccessLevel, MemoryStatus
from tests.integration.consolidation_helpers import DEEP, engine_with
from tests.integration.pass_y_helpers import llm_engine, statuses, topics
from tests.integration.pass_z_helpers import recurring, slow_model
from tests.integration.test_hostile_pass_o import FLOOD
from tests.integration.test_triggers import TOPIC, episode, seed, write

#: The summariser's answer time and its caller's timeout: each request answered just inside.
ANSWER_SECONDS = 0.85
TIMEOUT_SECONDS = 1.0
#: A topic of ten cut into pieces of two: five requests, over 4 s of answers.
PIECES = PlannerSettings(max_topic=2)


async def _slow_pass(
    kernel: Kernel, url: str, max_seconds: float, **settings: object
) -> ConsolidationReport:
    """A deep pass of ``max_seconds`` whose summariser asks the slow model at ``url`` (each
    call's timeout ``TIMEOUT_SECONDS``); at most 15 s."""
    engine = llm_engine(kernel, url, timeout=TIMEOUT_SECONDS, max_seconds=max_seconds, **settings)
    return await asyncio.wait_for(engine.run(DEEP), 15.0)


async def test_a_topic_cut_into_many_pieces_does_not_run_the_pass_past_its_limit(
    kernel: Kernel,
) -> None:
    """One public topic of ten episodes, cut into five pieces; the outside model answers each
    piece's request after 0.85 s, inside its 1 s timeout. Rule: a pass starts no work after
    ``ENGRAM_CONSOLIDATION_MAX_SECONDS`` (the specification's hard limit), overrunning it
    by at most one batch, and what it planned in time is committed. Failed before: the
    planner read the clock once per topic, so every piece of a topic begun in time was
    summarised, each call bounded only by the summariser's own timeout: a pass of 1.5 s
    took 4.9 s here and committed nothing (its one batch started after the deadline, and
    the level was not marked cut short), the same in every pass, so the topic was never
    consolidated. At the defaults a topic of up to a thousand records is 63 pieces of up to
    30 s each: half an hour past the limit, holding the consolidation lock."""
    written = await recurring(kernel, AccessLevel.PUBLIC)
    await engine_with(kernel).evaluate_candidates(DEEP)  # the clustering's imports paid
    with slow_model(ANSWER_SECONDS) as model:
        began = time.monotonic()
        report = await _slow_pass(kernel, model.url, 1.5, planner=PIECES)
        took = time.monotonic() - began
    # about 1.5-2 s on a quiet machine: the limit, and one batch; 4.9 s before the fix
    assert took < 3.5, (took, model.asked)
    assert report.consumed, "nothing committed"  # what was planned in time is kept
    assert set(report.consumed) < set(written)  # and the rest left to the next pass


async def test_a_last_piece_cut_at_the_deadline_still_commits_its_batch(kernel: Kernel) -> None:
    """One public topic of ten episodes in two pieces of five, all in one batch; the outside
    model answers each request after 0.85 s, and the level's deadline (0.8 of a 1.5 s pass)
    falls during the second call, which is cut there and takes the extractive text. Rule:
    what a level planned in time is committed, so a level is never left due for ever
    (ADR-019, amendments of 2026-11-29). Found by the review of pass Z: no piece came after
    the cut one to be counted ``timed_out``, so the level was not taken as cut short, its
    one batch met the clock past the deadline and was ``timed_out``, in every pass: the
    topic was never consolidated."""
    written = await recurring(kernel, AccessLevel.PUBLIC)
    await engine_with(kernel).evaluate_candidates(DEEP)  # the clustering's imports paid
    with slow_model(ANSWER_SECONDS) as model:
        report = await _slow_pass(
            kernel, model.url, 1.5, planner=PlannerSettings(max_topic=5), batch_size=20
        )
    assert model.asked == 2
    assert set(written) == set(report.consumed), report.skipped


async def test_one_open_topic_does_not_take_a_closed_levels_share_of_the_pass(
    kernel: Kernel,
) -> None:
    """The same topic at the public level, and a topic of two episodes at the sensitive
    level (summarised in the kernel, never sent out), in one pass of 4 s. Rule (ADR-019):
    each level has its own deadline, and ``LEVEL_RESERVE`` of the pass is kept for every
    more closed level, so the most open level's work ends by 80 % of the pass and the
    sensitive level gets its turn whatever the public level holds (20 % of the pass, 0.8 s
    here, less the public level's last batch). Failed before: the public topic's five slow
    pieces ran the pass to 5.2 s, past the sensitive level's deadline (the end of the
    pass), and the sensitive topic was ``timed_out`` in every such pass."""
    await recurring(kernel, AccessLevel.PUBLIC)
    closed = [  # a topic of two: one piece
        await write(kernel, episode(text, 200 + n, access_level=AccessLevel.SENSITIVE))
        for n, text in enumerate(FLOOD[1][:2])
    ]
    await kernel.events.settled()
    await engine_with(kernel).evaluate_candidates(DEEP)  # the clustering's imports paid
    with slow_model(ANSWER_SECONDS) as model:
        # batches of two: each piece committed while the next is asked for
        report = await _slow_pass(kernel, model.url, 4.0, planner=PIECES, batch_size=2)
    assert AccessLevel.SENSITIVE not in report.timed_out_levels, report.skipped
    assert {MemoryStatus.CONSOLIDATED} == set(await statuses(kernel, closed))


async def test_a_closed_levels_grown_topic_does_not_hide_an_open_levels_routed_record(
    kernel: Kernel,
) -> None:
    """At the agent level, five related episodes, the fifth routed to consolidation by Layer
    2 (four related records before it), below the watch's topic threshold of six. Then six
    related episodes at the sensitive level: a grown topic. Rule: whether and when a
    caller's records are consolidated depends on records it may read alone (ADR-019's
    amendment), so the event check names the agent level due whatever the sensitive level
    holds. Failed before: the watch looked for routed records only when no level had a grown
    topic, so the sensitive topic made the check name the sensitive level alone; the pass it
    started left the agent level out, and while sensitive topics kept growing at every check
    (30 s apart) the agent level's routed record never got its pass."""
    watch = ConsolidationWatch(
        kernel.db, event_threshold=6, fast_path_limit=100_000, decay_threshold=0.5
    )
    await seed(kernel, TOPIC, access_level=AccessLevel.AGENT)
    await kernel.events.settled()
    alone = await watch.event_due(None)
    assert alone is not None
    assert alone.levels == (AccessLevel.AGENT,), alone
    await recurring(kernel, AccessLevel.SENSITIVE, 6)
    due = await watch.event_due(None)
    assert due is not None
    assert (AccessLevel.AGENT, AccessLevel.SENSITIVE) == due.levels, due


async def test_an_outside_summary_call_does_not_stall_the_event_loop() -> None:
    """Eight calls to the outside summariser (a loopback model answering at once) while a
    task ticks every 2 ms. Rule: the kernel's event loop serves every agent's request, so
    no part of a background pass may hold it for long (the webhook sink's client is made on
    a worker thread for this reason). Failed before: each call made a new HTTP client on the
    loop, and making one builds its TLS context (30-100 ms here, by the machine's load),
    during which no write, read or search of any agent moved: the longest tick was 55-78
    ms (5-12 ms now), and a pass of a thousand pieces stalled the kernel a thousand times.
    Fixed in ``infra/llm.py`` (the client is made on a worker thread)."""
    loop = asyncio.get_running_loop()
    costs = []
    for _ in range(3):  # what one client costs on this machine now (the first pays imports)
        began = time.perf_counter()
        await httpx.AsyncClient().aclose()
        costs.append(time.perf_counter() - began)
    making = min(costs)
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = loop.time()
            gaps.append(now - last)
            last = now

    with slow_model(0.0) as model:
        generator = OpenAICompatibleGenerator(model.url, model="m", timeout_seconds=5.0)
        await generator.complete("Summarise.", "warm-up")
        ticker = asyncio.create_task(tick())
        for n in range(8):
            assert "" == await generator.complete("Summarise.", f"record {n}")
        done.set()
        await ticker
    # each call held the loop about as long as making a client; two such gaps are allowed
    # for the machine's own jitter
    held = [round(gap, 3) for gap in gaps if gap >= 0.75 * making]
    assert len(held) <= 2, (held, making)


@pytest.mark.parametrize(
    ("echo", "tail"),
    [
        (80, ""),
        (1, " \x00"),
        (1, " \ud800"),
        (1, " Why does it keep failing?"),
        (1, " Ask bob.smith@example.com about it."),
    ],
    ids=["too-long", "nul", "lone-surrogate", "a-question", "an-address-added"],
)
async def test_an_outside_summary_the_gate_would_refuse_falls_back_to_the_extractive_text(
    kernel: Kernel, echo: int, tail: str
) -> None:
    """A topic of three episodes; the outside model answers with the sources' text (every
    fact kept, none added) said eighty times over (about 18,000 characters, over the 16,000
    a record holds), or once with a NUL or a lone surrogate after it (valid JSON escapes),
    or with a question after it (the topic is promoted to a belief, which states what is so),
    or with an e-mail address none of the sources holds (the facts check reads no address).
    Rule: whatever the outside summariser answers, the topic is consolidated (ADR-018: a
    bad answer falls back to the extractive text), so an answer the record cannot hold is
    not kept, nor one the Gate would quarantine above its sources' level. Failed before:
    the facts check passed each answer, the Gate's schema check refused the summary
    (``rejected``: 3) or its PII screen quarantined it (``quarantined``: 3), and so in every
    pass while the model answered so: the topic was never consolidated. Fixed in
    ``consolidation/candidates.py`` (``schemas.content_problems``, and the PII screen of
    an outside answer against its sources)."""
    (written,) = await topics(kernel, 1)
    with slow_model(0.0, echo=echo, tail=tail) as model:
        engine = llm_engine(kernel, model.url)
        report = await engine.run(DEEP)
    assert model.asked == 1
    assert set(written) == set(report.consumed), report.skipped


async def test_a_huge_outside_answer_is_not_read_whole(kernel: Kernel) -> None:
    """A topic of three episodes; the outside model answers with a well-formed document
    whose text is 64 MiB, sent as fast as the kernel reads it (well within the timeout).
    Rule: nothing an outside endpoint sends can grow the kernel's memory without bound (the
    webhook sink leaves its answers unread for this reason); a summary is at most 16,000
    characters, so an answer far larger is not read past a limit, and the topic takes the
    extractive text. Failed before: the generator read all 64 MiB, and the summary's facts
    check then ran over the text on the event loop, beyond the reach of any timeout: the
    pass, and every request of every agent, was held for minutes (pytest's 180 s limit
    ended it). Fixed in ``infra/llm.py`` (``MAX_ANSWER_BYTES``) and ``summarize.py`` (an
    answer longer than a record holds is not checked, the extractive text is used)."""
    (written,) = await topics(kernel, 1)
    with slow_model(0.0, huge=64 * 2**20) as model:
        engine = llm_engine(kernel, model.url)
        report = await engine.run(DEEP)
    assert model.sent < 16 * 2**20, model.sent
    assert set(written) == set(report.consumed), report.skipped
