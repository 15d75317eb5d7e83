"""Summarisers: clause selection, compression, the extractive and the checked summariser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import InfrastructureError
from engram.memory.consolidation.facts import content_words, lost_facts
from engram.memory.consolidation.summarize import (
    CheckedSummarizer,
    ExtractiveSummarizer,
    SourceText,
    Style,
    Summary,
    compressed_clauses,
    select_clauses,
)

T0 = datetime(2024, 3, 5, 14, 30, tzinfo=UTC)
VERBOSE = (
    "To be honest, basically the deploy to db-prod-2 failed, as I said before, the deploy "
    "failed, you know, because the disk was full at 92%. I think that the disk was full, "
    "actually, on the server."
)


def source(text: str, hours: float = 0.0) -> SourceText:
    """A source ``hours`` after T0."""
    return SourceText(text, T0 + timedelta(hours=hours))


SOURCES = [
    source("Restarted db-prod-2 at 14:30. The restart went fine."),
    source("Disk on db-prod-2 hit 92%; cleaned /var/log/app.", hours=18.5),
]


class FakeGenerator:
    """A TextGenerator that answers with a fixed text or raises a fixed error."""

    def __init__(self, answer: str = "", error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.calls: list[tuple[str, str]] = []

    @property
    def name(self) -> str:
        """The fake model's name."""
        return "fake-7b"

    async def complete(self, instructions: str, text: str) -> str:
        """Record the call, then answer or raise."""
        self.calls.append((instructions, text))
        if self.error is not None:
            raise self.error
        return self.answer


def test_select_clauses_drops_near_duplicates() -> None:
    """A clause repeating the words of a kept clause, without a new fact, is dropped."""
    chosen = select_clauses(
        [
            "The deploy of the billing service failed at noon.",
            "The deploy of the billing service failed at noon again.",
            "Rollback to v1.2 worked.",
        ]
    )
    assert [
        ["The deploy of the billing service failed at noon."],
        [],
        ["Rollback to v1.2 worked."],
    ] == chosen


def test_select_clauses_keeps_a_repeat_with_a_new_fact() -> None:
    """A clause otherwise repeating a kept one is kept when it brings a new fact."""
    chosen = select_clauses(
        ["The deploy of billing failed on v1.2.", "The deploy of billing failed on v1.3."]
    )
    assert [
        ["The deploy of billing failed on v1.2."],
        ["The deploy of billing failed on v1.3."],
    ] == chosen


def test_select_clauses_keeps_a_clause_with_enough_new_words() -> None:
    """A clause whose facts are kept but most of whose words are new is kept."""
    chosen = select_clauses(
        ["db-prod-2 ran out of disk.", "db-prod-2 paged the oncall engineer twice."]
    )
    assert [
        ["db-prod-2 ran out of disk."],
        ["db-prod-2 paged the oncall engineer twice."],
    ] == chosen


def test_select_clauses_drops_exact_repeats_and_empty_clauses() -> None:
    """An exact repeat (case and spacing aside) and a stop-word-only clause are dropped."""
    chosen = select_clauses(["Cache warmed up; it was.", "cache   WARMED up"])
    assert [["Cache warmed up"], []] == chosen


def test_select_clauses_keeps_one_list_per_text() -> None:
    """select_clauses returns one (possibly empty) list per input text, in order."""
    assert [[], ["Alpha shipped."], []] == select_clauses(["", "Alpha shipped.", "Alpha shipped."])


def test_compressed_clauses_cut_filler_and_repeats_but_keep_facts() -> None:
    """Compression drops filler phrases and repeated parts and keeps every fact."""
    kept = compressed_clauses(VERBOSE)
    assert ["The deploy to db-prod-2 failed, because the disk was full at 92%"] == kept
    assert [] == lost_facts([VERBOSE], " ".join(kept))


def test_compressed_clauses_do_not_cut_filler_holding_a_fact() -> None:
    """A filler phrase is kept when cutting it would lose a fact."""
    text = "Basically db-prod-2 died"
    assert [] == lost_facts([text], " ".join(compressed_clauses(text)))


def test_compressed_clauses_capitalise_each_clause() -> None:
    """Each compressed clause starts with a capital letter once leading filler is cut."""
    assert ["The cache on node-7 was cold", "The disk on node-8 was full"] == compressed_clauses(
        "honestly the cache on node-7 was cold; the disk on node-8 was full"
    )


def test_extractive_narrative_is_dated_and_in_given_order() -> None:
    """The narrative has one dated line per source with something to say, in the given order."""
    text = ExtractiveSummarizer().text(SOURCES, Style.NARRATIVE)
    assert [
        "2024-03-05 14:30: Restarted db-prod-2 at 14:30. The restart went fine.",
        "2024-03-06 09:00: Disk on db-prod-2 hit 92%. Cleaned /var/log/app.",
    ] == text.splitlines()
    reverse = ExtractiveSummarizer().text(SOURCES[::-1], Style.NARRATIVE)
    assert reverse.splitlines()[0].startswith("2024-03-06 09:00: Disk")


def test_extractive_narrative_skips_a_source_that_only_repeats() -> None:
    """A source whose every clause repeats a kept one gets no line of its own."""
    sources = [
        source("The nightly backup of orders completed."),
        source("The nightly backup of orders completed.", 24),
    ]
    assert ["2024-03-05 14:30: The nightly backup of orders completed."] == (
        ExtractiveSummarizer().text(sources, Style.NARRATIVE).splitlines()
    )


def test_extractive_belief_notes_how_often_it_was_seen() -> None:
    """A belief of several sources states the observation once with its count and dates."""
    sources = [
        source("The nightly backup of orders completed."),
        source("The nightly backup of orders completed.", 48),
        source("The nightly backup of orders completed.", 24),
    ]
    assert (
        "The nightly backup of orders completed. (Observed 3 times between 2024-03-05 and "
        "2024-03-07.)"
    ) == ExtractiveSummarizer().text(sources, Style.BELIEF)


def test_extractive_belief_of_one_source_has_no_count() -> None:
    """A belief of one source is its text alone."""
    assert "Restarted db-prod-2 at 14:30. The restart went fine." == ExtractiveSummarizer().text(
        SOURCES[:1], Style.BELIEF
    )


def test_extractive_compress_shortens_filler_heavy_text() -> None:
    """Compression keeps every fact and uses fewer words than the filler-heavy source."""
    text = ExtractiveSummarizer().text([source(VERBOSE)], Style.COMPRESS)
    assert [] == lost_facts([VERBOSE], text)
    assert len(text.split()) < len(VERBOSE.split()) / 2
    assert text.endswith(".")


def test_extractive_text_of_nothing_is_empty() -> None:
    """Sources without content give an empty text in every style."""
    empty = [source("")]
    assert {""} == {ExtractiveSummarizer().text(empty, style) for style in Style}


async def test_extractive_summarize_names_itself() -> None:
    """ExtractiveSummarizer.summarize returns its text named extractive@1."""
    summariser = ExtractiveSummarizer()
    summary = await summariser.summarize(SOURCES, Style.BELIEF)
    assert Summary(summariser.text(SOURCES, Style.BELIEF), "extractive@1") == summary


WORDS = st.sampled_from(
    ["the", "disk", "deploy", "cache", "failed", "on", "was", "restarted", "again", "billing",
     "queue", "full", "after", "node", "worker", "we", "checked", "then"]
)  # fmt: skip
FACTS = st.one_of(
    st.builds("v{}.{}.{}".format, st.integers(0, 20), st.integers(0, 20), st.integers(0, 99)),
    st.builds("db-prod-{}".format, st.integers(0, 99)),
    st.builds("INC-{}".format, st.integers(100, 9999)),
    st.builds("{}%".format, st.integers(10, 100)),
    st.builds("{} ms".format, st.integers(10, 5000)),
    st.builds("2024-0{}-1{}".format, st.integers(1, 9), st.integers(0, 9)),
)
TOKENS = st.lists(st.one_of(WORDS, WORDS, FACTS), min_size=2, max_size=10)
SENTENCE = TOKENS.map(lambda tokens: " ".join(tokens).capitalize() + ".")
TEXT = st.lists(SENTENCE, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), style=st.sampled_from(list(Style)))
def test_extractive_summary_never_loses_a_fact(texts: list[str], style: Style) -> None:
    """For any sources of words, numbers, ids and versions, every style keeps every fact."""
    sources = [source(text, hours=n) for n, text in enumerate(texts)]
    summary = ExtractiveSummarizer().text(sources, style)
    assert [] == lost_facts(texts, summary)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4))
def test_selected_clauses_come_from_their_source(texts: list[str]) -> None:
    """Every clause select_clauses keeps is part of its own source and says something."""
    for text, kept in zip(texts, select_clauses(texts), strict=True):
        for clause in kept:
            assert clause in text
            assert content_words(clause) or lost_facts([clause], "")


async def test_checked_uses_an_answer_that_keeps_every_fact() -> None:
    """An LLM answer keeping every fact is used and named llm:<model>."""
    answer = "db-prod-2 restarted at 14:30, later hit 92% disk; /var/log/app was cleaned."
    generator = FakeGenerator(answer=f"  {answer}\n")
    summary = await CheckedSummarizer(generator, ExtractiveSummarizer()).summarize(
        SOURCES, Style.NARRATIVE
    )
    assert Summary(answer, "llm:fake-7b") == summary


async def test_checked_sends_dated_sources_and_style_instructions() -> None:
    """The generator gets the sources dated one a line and instructions for the style."""
    generator = FakeGenerator(answer="x")
    checked = CheckedSummarizer(generator, ExtractiveSummarizer())
    await checked.summarize(SOURCES, Style.NARRATIVE)
    await checked.summarize(SOURCES, Style.COMPRESS)
    (narrative, text), (compress, _) = generator.calls
    assert (
        "[2024-03-05 14:30] Restarted db-prod-2 at 14:30. The restart went fine.\n"
        "[2024-03-06 09:00] Disk on db-prod-2 hit 92%; cleaned /var/log/app."
    ) == text
    assert narrative != compress
    assert "exactly" in narrative


@pytest.mark.parametrize(
    "generator",
    [
        pytest.param(
            FakeGenerator(answer="db-prod-2 restarted at 14:30 and hit 92%."), id="drops-a-fact"
        ),
        pytest.param(FakeGenerator(answer=""), id="empty"),
        pytest.param(FakeGenerator(answer="   \n"), id="blank"),
        pytest.param(FakeGenerator(error=InfrastructureError("endpoint down")), id="fails"),
    ],
)
async def test_checked_falls_back_to_extractive(generator: FakeGenerator) -> None:
    """A lossy, empty or failing answer gives the extractive text named extractive@1."""
    fallback = ExtractiveSummarizer()
    summary = await CheckedSummarizer(generator, fallback).summarize(SOURCES, Style.BELIEF)
    assert Summary(fallback.text(SOURCES, Style.BELIEF), "extractive@1") == summary
    assert 1 == len(generator.calls)


async def test_checked_does_not_swallow_unexpected_errors() -> None:
    """An error that is not an engram error (a bug) propagates rather than falling back."""
    generator = FakeGenerator(error=RuntimeError("bug"))
    with pytest.raises(RuntimeError, match="bug"):
        await CheckedSummarizer(generator, ExtractiveSummarizer()).summarize(SOURCES, Style.BELIEF)


def test_extractive_summary_keeps_a_name_after_a_title() -> None:
    """A clause differing from a kept one only by the name after "Dr." is kept.

    Regression: when facts() missed names after a title, the second clause brought no new
    fact and was dropped as a near-duplicate, so the text never mentioned Dr. Smith.
    """
    sources = [
        source("Yesterday we met Dr. Alvarez at the main clinic downtown."),
        source("Yesterday we met Dr. Smith at the main clinic downtown.", 24),
    ]
    assert "Smith" in ExtractiveSummarizer().text(sources, Style.NARRATIVE)
