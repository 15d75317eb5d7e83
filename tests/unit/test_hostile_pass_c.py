"""Hostile pass C: PII screening findings (pure logic, no mocks)."""

from __future__ import annotations

import time
from typing import Any

import phonenumbers
import pytest

from engram.memory.gate.pii import assignments, scan
from engram.memory.gate.pii.contact import MAX_NATIONAL_TRIES
from engram.memory.gate.pii.findings import PiiKind


def _kinds(text: str) -> set[PiiKind]:
    return {f.kind for f in scan(text)}


def _best_ms(text: str, runs: int = 2) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        scan(text)
        best = min(best, (time.perf_counter() - started) * 1000)
    return best


def _counted(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """The calls of ``owner.name`` counted in the list's one item (the function still
    answers them): a cost that timings on a shared machine cannot tell apart."""
    calls = [0]
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


# --------------------------------------------------------------------------- performance


def test_key_value_pair_whitespace_is_not_quadratic() -> None:
    """assignments._KEY_VALUE: `[\"']\\s*,?\\s*[\"']?value` backtracks O(n^2) over a run of
    whitespace after key="..." when no value field follows. ~2.5-3.5 s at 16,000 chars."""
    text = 'key="a"' + " " * 16_000 + "value"
    assert _best_ms(text, runs=1) < 500  # 2,500-3,500 ms before


def test_identity_keyword_flood_is_not_quadratic() -> None:
    """identifiers._IdKeywords.before scans every keyword for every candidate: O(k * c)."""
    small, large = ("SIN ABCPA1234Z " * 1100)[:8_000], ("SIN ABCPA1234Z " * 2200)[:32_000]
    # linear: four times the text, about four times the time (sixteen when quadratic)
    assert _best_ms(large, runs=3) < 8 * _best_ms(small, runs=3) + 20


def test_document_keyword_flood_scans_fast() -> None:
    """documents.find_documents: every short keyword ("fin", "cpr") runs up to six stdnum
    validators on the token after it and on the tokens before it."""
    text = ("1234567 fin " * 1400)[:16_000]
    assert _best_ms(text) < 150  # 190 ms before


def test_phone_word_and_digit_soup_reads_few_runs_in_national_formats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """contact.find_phones: with a phone word, each of the 48 runs was read in every national
    format. The cap is counted, not timed: on a 2-core CI machine the whole scan of this text
    takes 70-110 ms with or without the cap, so a time bound could not tell them apart."""
    parses = _counted(monkeypatch, phonenumbers, "parse")
    scan(("tel" + "1 " * 8000)[:16_000])
    assert 0 < parses[0] <= MAX_NATIONAL_TRIES + 1  # 48 before


# --------------------------------------------------------------------------- folding bypasses

_VALUES = {
    "card": ("card 41111111{}11111111 ok", PiiKind.PAYMENT_CARD),
    "ssn": ("ssn 536-22{}-8317 ok", PiiKind.US_SSN),
    "email": ("mail alice.smith@exam{}ple.org ok", PiiKind.EMAIL),
    "iban": ("GB82WEST1234{}5698765432", PiiKind.IBAN),
}


@pytest.mark.parametrize(
    "hidden",
    [
        "\u2066",  # LEFT-TO-RIGHT ISOLATE (Cf), outside _DISGUISES (\u2064 is its end)
        "\u2069",  # POP DIRECTIONAL ISOLATE (Cf)
        "\u061c",  # ARABIC LETTER MARK (Cf)
        "\u180e",  # MONGOLIAN VOWEL SEPARATOR (Cf)
        "\U000e0020",  # TAG SPACE (Cf)
        "\ufff9",  # INTERLINEAR ANNOTATION ANCHOR (Cf)
        "\U0001d173",  # MUSICAL SYMBOL BEGIN BEAM (Cf)
        "\u034f",  # COMBINING GRAPHEME JOINER (Mn, default ignorable)
        "\ufe0f",  # VARIATION SELECTOR-16 (Mn, default ignorable)
    ],
)
@pytest.mark.parametrize("name", sorted(_VALUES))
def test_invisible_characters_do_not_hide_pii(hidden: str, name: str) -> None:
    """Found by hostile pass C."""
    template, kind = _VALUES[name]
    assert kind in _kinds(template.format(hidden))


def test_invisible_character_ignored_even_on_the_folded_path() -> None:
    """A zero-width space elsewhere sends the text through _fold, which drops Cf but keeps
    variation selectors (Mn): the card still hides."""
    assert PiiKind.PAYMENT_CARD in _kinds("card 4111\ufe0f1111\ufe0f1111\ufe0f1111 \u200b")


def test_arabic_indic_digits_are_read_as_digits() -> None:
    """NFKC leaves U+0660..U+0669 alone; a reader sees a card number."""
    assert PiiKind.PAYMENT_CARD in _kinds("card \u0664\u0661\u0661\u0661" + "\u0661" * 12)


# --------------------------------------------------------------------------- lower() shift


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("My passport number is K4821937 for the trip", PiiKind.NATIONAL_ID),
        ("PESEL 92071590225", PiiKind.NATIONAL_ID),
        ("bank account number 12345678 at the bank, wire transfer", PiiKind.BANK_ACCOUNT),
    ],
)
def test_one_dotted_capital_i_does_not_switch_keyword_rules_off(text: str, kind: PiiKind) -> None:
    """ "İ".lower() is two characters, so len(t.lower) != len(t.raw) and documents, accounts
    and the identity-keyword window give up. One "İ" anywhere (İstanbul) hides them all."""
    assert kind in _kinds(text)
    assert kind in _kinds("İstanbul trip. " + text)


# --------------------------------------------------------------------------- false positives


def test_dl_as_deep_learning_is_not_a_driving_licence() -> None:
    """Found by hostile pass C."""
    assert scan("Our DL pipeline trains ResNet50 on 1281167 images.") == []


# --------------------------------------------------------------------------- feedback budget

from engram.memory.conflict.detection import ConflictDetector  # noqa: E402
from engram.memory.gate.access import caller_for_tier  # noqa: E402
from engram.memory.gate.advisor import AdvisorContext, HeuristicAdvisor  # noqa: E402
from engram.memory.types import (  # noqa: E402
    AccessLevel,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)
from engram.retrieval.budget import FeedbackBudget  # noqa: E402


def test_feedback_budget_forgets_agents_whose_buckets_refilled() -> None:
    """FeedbackBudget.take prunes only buckets whose *stored* tokens are full, but a stored
    bucket is never full after a take (at most BURST - 1): nothing is ever pruned, the dict
    grows with every agent id, and past 10,000 ids every take copies the whole dict."""
    now = [0.0]
    budget = FeedbackBudget(clock=lambda: now[0])
    for i in range(10_001):
        budget.take(f"agent-{i}")
    now[0] += 3600.0  # an hour later every bucket has long refilled
    budget.take("late-agent")
    assert len(budget._buckets) <= 10_000


def test_feedback_budget_take_stays_cheap_with_many_agents() -> None:
    """Found by hostile pass C."""
    budget = FeedbackBudget()
    for i in range(10_000):
        budget.take(f"agent-{i}")
    started = time.perf_counter()
    for i in range(10_000, 10_500):
        budget.take(f"agent-{i}")
    assert (time.perf_counter() - started) < 0.05  # ~0.5 s: each take rebuilds the dict


# --------------------------------------------------------------------------- advisor features

_STANDARD = caller_for_tier("a", TrustLevel.STANDARD)


def _belief(text: str, **fields: object) -> MemoryRecord:
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


async def test_a_neighbour_above_the_proposal_does_not_change_its_features() -> None:
    """advisor.HeuristicAdvisor.advise: conflicts with `above` neighbours flow into
    advice_features (conflict, supersession, contested flags); the learned advisor
    (RLAdvisor._choose) picks ADD / NOOP / UPDATE for the proposal from those features, so a
    record the proposal's readers may not read decides what they get (ADR-008)."""
    advisor = HeuristicAdvisor(ConflictDetector())
    readable = Neighbour(_belief("The office coffee machine is on floor 3."), 0.70)
    hidden = Neighbour(_belief("The deploy target is v2.0.", access_level=AccessLevel.SYSTEM), 0.98)
    proposal = _belief("The deploy target is v2.1.")
    plain = AdvisorContext(
        GateAction.CREATE, GateDecisionType.EXTERNAL, _STANDARD, neighbours=(readable,)
    )
    with_above = AdvisorContext(
        GateAction.CREATE,
        GateDecisionType.EXTERNAL,
        _STANDARD,
        neighbours=(readable,),
        above=(hidden,),
    )
    expected = await advisor.advise(proposal, plain)
    got = await advisor.advise(proposal, with_above)
    assert expected.features == got.features


# --------------------------------------------------------------------------- stdio MCP

import asyncio  # noqa: E402
import io  # noqa: E402

import anyio  # noqa: E402

from engram.protocols.mcp.stdio import (  # noqa: E402
    MAX_LINE_BYTES,
    _file_readline,
    _PipeLines,
    _SerialWriter,
)


async def test_an_over_long_stdio_line_is_answered_not_fatal() -> None:
    """stdio._PipeLines.__anext__: StreamReader.readline raises ValueError past MAX_LINE_BYTES;
    it escapes to the SDK's reader and ends the session with no answer."""
    out = io.StringIO()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    reader.feed_data(b"x" * (MAX_LINE_BYTES + 10) + b"\n")
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    reader.feed_eof()
    lines = _PipeLines(reader.readline, _SerialWriter(anyio.wrap_file(out)))
    line = await lines.__anext__()
    assert '"ping"' in line
    assert "-32" in out.getvalue()  # the long line got a JSON-RPC error


async def test_an_over_long_line_of_a_file_on_stdin_is_answered_as_over_a_pipe() -> None:
    """The same line read from a regular file (``engram mcp < calls.jsonl``): its reader
    keeps the pipe's limit, so the long line is answered and the next one read."""
    out = io.StringIO()
    stdin = io.BytesIO(
        b"x" * (MAX_LINE_BYTES + 10) + b'\n{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
    )
    lines = _PipeLines(_file_readline(stdin), _SerialWriter(anyio.wrap_file(out)))
    line = await lines.__anext__()
    assert '"ping"' in line
    assert "-32" in out.getvalue()
    with pytest.raises(StopAsyncIteration):
        await lines.__anext__()


def test_a_name_repeated_has_its_one_value_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """assignments.find_assignments: in "key=key=…" every occurrence of the name after the
    first assigns the same 500-character value, and each was judged again (its entropy, its
    placeholder markers): 4,000 judgements in 16,000 characters, ten to fifteen times the
    screen of prose. A value judged for the name before it is not judged again. Counted, not
    timed."""
    judged = _counted(monkeypatch, assignments, "secret_value_ok")
    assert PiiKind.SECRET_ASSIGNMENT not in _kinds(("key=" * 4000)[:16_000])
    assert 0 < judged[0] < 400  # 4,000 before
    judged[0] = 0
    found = _kinds("key=key=key=x password=Tr0ub4dor&3-horse key=key=")
    assert PiiKind.SECRET_ASSIGNMENT in found
    assert judged[0] >= 2  # a different value is judged
