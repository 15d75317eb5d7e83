"""What a search may be asked: the bounds of its arguments and the problems of a request.

``Retrieval.search`` is also the in-process API, so its arguments are checked for their types
as well as their values: a caller in the same process may pass anything, and a wrong type
must be a :class:`~engram.errors.ValidationFailed` naming the argument, not a TypeError from
deep inside or the driver's refusal (nor ``True`` read as a limit of 1). The adapters'
schemas (``SearchInput``) enforce the same bounds before a request gets here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.memory.storable import instant_problem, shows_nothing
from engram.memory.types import CallerIdentity, MemoryType
from engram.memory.types import caller_problems as identity_problems

MAX_LIMIT = 100
MAX_QUERY_CHARS = 2000
#: Most tags one search (or listing) may filter on, and the longest tag: what a record may carry.
MAX_TAG_FILTERS = 32
MAX_TAG_CHARS = 64


def caller_problems(caller: object) -> list[str]:
    """What is wrong with the identity a search or rating is made for: it decides what may be
    read, so anything but a caller identity (``None`` above all, which internal reads use to
    read every level) is refused before anything is read or counted."""
    if isinstance(caller, CallerIdentity) and not identity_problems(caller):
        return []
    # an identity is checked when it is made; one altered since (object.__setattr__) is not
    return ["caller: the CallerIdentity of an authenticated agent"]


def query_problems(query: object, namespace: object, limit: object) -> list[str]:
    """What is wrong with a search's query (stripped of surrounding spaces), namespace and
    limit."""
    problems = []
    text = query.strip() if isinstance(query, str) else ""
    if not isinstance(query, str):
        problems.append("query: a string")
    elif shows_nothing(text):  # spaces, or only invisible characters
        problems.append("query: must not be empty")
    if len(text) > MAX_QUERY_CHARS:
        problems.append(f"query: at most {MAX_QUERY_CHARS} characters")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        problems.append(f"limit: an integer between 1 and {MAX_LIMIT}")
    if not isinstance(namespace, str):
        problems.append("namespace: a string")
        namespace = ""
    if "\x00" in text or "\x00" in namespace:
        problems.append("query, namespace: must not contain NUL characters")
    elif not encodes(text + namespace):
        problems.append("query, namespace: must not contain lone surrogates")
    return problems


def filter_problems(tags: object, min_score: object) -> list[str]:
    """What is wrong with a search's tag filter and similarity floor (nothing: ``[]``)."""
    problems = []
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, int | float)
        or not 0.0 <= min_score <= 1.0  # NaN fails both comparisons
    ):
        problems.append("min_score: a number from 0 to 1")
    if isinstance(tags, str):
        problems.append("tags: a list of strings, not one string")
    elif tags is not None and not isinstance(tags, list | tuple):
        problems.append("tags: a list of strings")
    elif tags is not None:
        if len(tags) > MAX_TAG_FILTERS:
            problems.append(f"tags: at most {MAX_TAG_FILTERS}")
        if not all(isinstance(tag, str) and 0 < len(tag) <= MAX_TAG_CHARS for tag in tags):
            problems.append(f"tags: each a string of 1-{MAX_TAG_CHARS} characters")
        elif any("\x00" in tag or not encodes(tag) for tag in tags):
            problems.append("tags: must not contain NUL characters or lone surrogates")
    return problems


def scope_problems(
    types: object, instants: dict[str, object], flags: dict[str, object]
) -> list[str]:
    """What is wrong with a search's types, as-of instants (name -> value) and switches."""
    problems = []
    if types is not None and (
        not isinstance(types, Sequence)
        or isinstance(types, str)
        or not all(isinstance(t, MemoryType) for t in types)
    ):
        problems.append("types: a list of memory types")
    for name, value in instants.items():
        if value is None:
            continue
        if not isinstance(value, datetime) or value.tzinfo is None:
            problems.append(f"{name}: an instant with a timezone")
        elif (problem := instant_problem(value)) is not None:
            problems.append(f"{name}: {problem}")
    problems += [f"{name}: true or false" for name, v in flags.items() if not isinstance(v, bool)]
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
