"""The order of search hits (engram.retrieval.ranking)."""

from __future__ import annotations

import math
from uuid import UUID, uuid4

from engram.retrieval.ranking import fuse, lexical_shares, rerank
from engram.retrieval.search import MAX_TEXT_MATCHES, SQL


def _ids(n: int) -> list[UUID]:
    return [uuid4() for _ in range(n)]


def test_fusion_puts_a_record_both_legs_found_first() -> None:
    """A record both legs found outranks one either found alone; each keeps its ranks."""
    a, b, c = _ids(3)
    fused = fuse({"vector": [a, b], "text": [c, b]})
    assert b == fused[0][0]
    assert {"vector": 2, "text": 2} == fused[0][2]
    assert math.isclose(2 / 62, fused[0][1])


def test_ids_a_leg_cannot_tell_apart_share_its_rank() -> None:
    """Equal values (two records with one embedding) get the rank of the first of them and
    the same fused score, whichever random id the database put first; the next value gets
    its own position, as in a competition ranking."""
    a, b, c, d = uuid4(), uuid4(), uuid4(), uuid4()
    fused = fuse({"vector": [a, b, c, d]}, values={"vector": [0.1, 0.3, 0.3, 0.4]})
    ranks = {item: legs["vector"] for item, _, legs in fused}
    scores = {item: score for item, score, _ in fused}
    assert ranks == {a: 1, b: 2, c: 2, d: 4}
    assert scores[b] == scores[c] > scores[d]
    plain = fuse({"vector": [a, b, c, d]})
    assert [legs["vector"] for _, _, legs in plain] == [1, 2, 3, 4]


def test_a_rare_shared_word_weighs_more_than_a_common_one() -> None:
    """Of two candidates holding one query word each, the one holding the word fewer
    candidates hold has the larger share; one holding every word has share 1."""
    a, b, c, d = _ids(4)
    shares = lexical_shares(
        ["kafka", "e4012"],
        {a: ["kafka"], b: ["kafka"], c: ["kafka", "e4012"], d: []},
    )
    assert shares[c] == 1.0
    assert shares[b] < shares[c] - shares[b]  # e4012 (held by one) weighs more than kafka
    assert 0.0 == shares[d]


def test_a_word_no_candidate_holds_still_counts_in_the_whole() -> None:
    """A query word no candidate holds keeps every share below 1."""
    a, b = _ids(2)
    shares = lexical_shares(["billing", "osteria"], {a: ["billing"], b: []})
    assert 0 < shares[a] < 1


def test_no_words_or_no_candidates_give_no_share() -> None:
    """A query with no indexable word leaves every share at 0."""
    a = uuid4()
    assert {a: 0.0} == lexical_shares([], {a: ["x"]})
    assert {} == lexical_shares(["x"], {})


def test_rerank_adds_the_weighted_share_to_the_similarity() -> None:
    """Order by similarity + weight * share; ties keep the fused order; ranks are kept."""
    a, b, c = _ids(3)
    fused = [(a, 0.03, {"vector": 1}), (b, 0.02, {"vector": 2}), (c, 0.01, {"text": 1})]
    ordered = rerank(fused, {a: 0.70, b: 0.65}, {a: 0.0, b: 0.5, c: 1.0}, weight=0.3)
    assert [b, a, c] == [item for item, _, _ in ordered]
    assert math.isclose(0.65 + 0.15, ordered[0][1])
    assert {"text": 1} == ordered[2][2]
    tied = rerank(fused, {a: 0.5, b: 0.5}, {}, weight=0.3)
    assert [a, b, c] == [item for item, _, _ in tied]


def test_the_text_legs_count_stops_one_past_the_cap() -> None:
    """The SQL counts the text leg's matches one past MAX_TEXT_MATCHES, so the search can
    tell a rare term from a common one."""
    for name in ("text_heads", "text_versions"):
        assert f"LIMIT {MAX_TEXT_MATCHES + 1})" in SQL[name]
