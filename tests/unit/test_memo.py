"""Per-text caches bounded by entries and characters (engram.memory.conflict.memo)."""

from __future__ import annotations

from engram.memory.conflict.memo import per_text


def test_a_cached_answer_is_given_again_without_asking_the_function() -> None:
    """A text asked twice is read once."""
    asked: list[str] = []

    @per_text(4, chars=100)
    def length(text: str) -> int:
        asked.append(text)
        return len(text)

    assert [3, 3, 2] == [length("abc"), length("abc"), length("ab")]
    assert ["abc", "ab"] == asked


def test_the_least_recently_used_texts_go_first_past_either_bound() -> None:
    """Past the entries or the characters, the texts asked longest ago are dropped."""
    asked: list[str] = []

    @per_text(3, chars=80)
    def few(text: str) -> str:
        asked.append(text)
        return text

    for text in ("a", "b", "c", "a", "d"):  # "a" asked again, so "b" is the oldest
        few(text)
    few("b")
    assert (["a", "b", "c", "d", "b"], (3, 3)) == (asked, few.held)

    @per_text(100, chars=80)
    def long(text: str) -> str:
        asked.append(text)
        return text

    for letter in "abcdefgh":
        long(letter * 10)
    assert (8, 80) == long.held
    long("a" * 10)  # the oldest: kept, now the newest
    long("i" * 10)  # 90 characters: "b…" goes
    assert (8, 80) == long.held
    asked.clear()
    for text in ("a" * 10, "b" * 10):
        long(text)
    assert ["b" * 10] == asked


def test_a_text_longer_than_an_eighth_of_the_budget_is_answered_and_not_kept() -> None:
    """One long text never drops what the cache holds."""

    @per_text(3, chars=80)
    def same(text: str) -> str:
        return text

    same("a")
    assert ("z" * 11, (1, 1)) == (same("z" * 11), same.held)


def test_clearing_forgets_every_answer() -> None:
    """cache_clear empties the cache and its count of characters."""

    @per_text(3, chars=10)
    def same(text: str) -> str:
        return text

    same("abc")
    same.cache_clear()
    assert (0, 0) == same.held
