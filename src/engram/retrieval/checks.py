"""What a search's arguments may be, and what is wrong with those that are not.

Each check returns the problems it finds as short messages naming the field (nothing: ``[]``);
the search raises them together as one ``ValidationFailed``, before it embeds or queries.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Most hits one search returns, and the longest query text (after stripping).
MAX_LIMIT = 100
MAX_QUERY_CHARS = 2000
#: Most tags one search (or listing) may filter on, and the longest tag: what a record may carry.
MAX_TAG_FILTERS = 32
MAX_TAG_CHARS = 64


def query_problems(text: str, namespace: str, limit: int) -> list[str]:
    """What is wrong with a search's (stripped) query text, namespace and limit."""
    problems = []
    if not text:
        problems.append("query: must not be empty")
    if len(text) > MAX_QUERY_CHARS:
        problems.append(f"query: at most {MAX_QUERY_CHARS} characters")
    if not 1 <= limit <= MAX_LIMIT:
        problems.append(f"limit: between 1 and {MAX_LIMIT}")
    if "\x00" in text or "\x00" in namespace:
        problems.append("query, namespace: must not contain NUL characters")
    elif not encodes(text + namespace):
        problems.append("query, namespace: must not contain lone surrogates")
    return problems


def filter_problems(tags: Sequence[str] | None, min_score: float) -> list[str]:
    """What is wrong with a search's tag filter and similarity floor (nothing: ``[]``)."""
    problems = []
    if not 0.0 <= min_score <= 1.0:  # NaN fails both comparisons
        problems.append("min_score: a number from 0 to 1")
    if isinstance(tags, str):
        problems.append("tags: a list of strings, not one string")
    elif tags is not None:
        if len(tags) > MAX_TAG_FILTERS:
            problems.append(f"tags: at most {MAX_TAG_FILTERS}")
        if not all(0 < len(tag) <= MAX_TAG_CHARS for tag in tags):
            problems.append(f"tags: each of 1-{MAX_TAG_CHARS} characters")
        elif any("\x00" in tag or not encodes(tag) for tag in tags):
            problems.append("tags: must not contain NUL characters or lone surrogates")
    return problems


def encodes(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (a lone surrogate has none, so PostgreSQL and the
    model cannot be sent it)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
