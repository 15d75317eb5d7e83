"""Length grouping of texts for the fastembed embedder (engram.infra.fastembed_embedder)."""

from __future__ import annotations

from engram.infra.fastembed_embedder import length_groups


def test_length_groups_cover_every_text_once_with_a_bounded_spread() -> None:
    """Each text lands in exactly one group, and no group pads its shortest by over 15 %."""
    texts = ["w" * n for n in (90, 12, 40, 41, 100, 13, 44, 300, 12, 95)]
    groups = length_groups(texts)
    assert list(range(len(texts))) == sorted(i for group in groups for i in group)
    for group in groups:
        lengths = [len(texts[i]) for i in group]
        assert max(lengths) <= 1.15 * min(lengths)
    assert [[1, 8, 5], [2, 3, 6], [0, 9, 4], [7]] == groups


def test_length_groups_of_equal_or_no_texts() -> None:
    """Texts of one length form one group; no texts form no group."""
    assert [[0, 1, 2]] == length_groups(["abc", "def", "ghi"])
    assert [] == length_groups([])
    assert [[0, 1]] == length_groups(["", "a"])
