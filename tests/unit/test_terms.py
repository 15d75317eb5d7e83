"""The query terms the full-text leg matches (engram.retrieval.terms)."""

from __future__ import annotations

import time

import pytest

from engram.retrieval.terms import MAX_TERMS, distinctive, distinctive_terms, pieces, vocabulary


@pytest.mark.parametrize(
    "token",
    ["E4012", "pay-gw-03.eu.internal", "max_pool_size", "v2.3.1", "8443", "INC-2231", "Okonkwo"],
)
def test_codes_hosts_keys_versions_and_rare_names_are_terms(token: str) -> None:
    """What an embedding blurs and an exact match catches is a term."""
    assert distinctive(token)


@pytest.mark.parametrize(
    "token", ["the", "service", "retry", "deployment", "Frankfurt", "12", "2026", "api", "on"]
)
def test_common_words_short_numbers_and_years_are_not(token: str) -> None:
    """Words the tokenizer spells in one or two pieces, short numbers and years are not."""
    assert not distinctive(token)


def test_a_word_is_spelled_longest_piece_first() -> None:
    """Pieces are counted as WordPiece spells a word: longest entry first."""
    entries = frozenset({"kube", "##rn", "##etes", "re", "##try"})
    assert 3 == pieces("kubernetes", entries)
    assert 2 == pieces("retry", entries)
    assert 1 + 4 == pieces("kubezzzz", entries)  # what the vocabulary cannot spell, a char each


def test_the_vocabulary_is_the_tokenizers() -> None:
    """The vocabulary is the shipped tokenizer's, continuations included."""
    words = vocabulary()
    assert 30_000 < len(words) < 31_000
    assert {"the", "##s", "frankfurt"} <= words


def test_terms_keep_query_order_once_each_and_are_capped() -> None:
    """Terms come in query order, once each (case ignored), at most MAX_TERMS."""
    assert ["e4012", "Okonkwo"] == distinctive_terms("Did e4012 or E4012 page Okonkwo on Monday?")
    assert [] == distinctive_terms("Which service does not retry on timeouts?")
    many = " ".join(f"E{4000 + n}" for n in range(20))
    assert MAX_TERMS == len(distinctive_terms(many))


def test_a_huge_word_is_not_spelled() -> None:
    """A word longer than WordPiece spells is no term, and costs nothing to judge (spelling
    it would take seconds: the work grows with the cube of its length)."""
    started = time.perf_counter()
    assert [] == distinctive_terms("qz" * 1000)
    assert [] == distinctive_terms(" ".join(["a" * 1999]))
    assert time.perf_counter() - started < 0.05
    assert distinctive("zq" * 50)  # 100 letters: still spelled, and rare
