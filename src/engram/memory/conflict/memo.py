"""Per-text caches bounded by the characters they hold as well as by their entries.

The conflict judgement and the advisor's features parse each text once and keep what they
read (its sentences, amounts, names, marks), since a store's records come back as neighbours
write after write. What such a reading holds grows with the text: the amounts of 16,000
characters of numbers take about a megabyte. ``functools.lru_cache`` bounds only the number
of entries, so 8,192 crafted records of the largest size an adapter accepts would have kept
gigabytes in the process (hostile pass R). :func:`per_text` keeps at most ``entries`` texts
and at most ``chars`` characters of them, dropping the least recently used first: an
agent's memory is a few hundred characters, so ordinary use keeps as many entries as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: Characters of text one cache keeps at most (about 8,192 memories of 120 characters).
CACHED_CHARS = 1_000_000


class PerText(Generic[T]):
    """A function of one text with a least-recently-used cache of its answers."""

    def __init__(self, function: Callable[[str], T], *, entries: int, chars: int) -> None:
        self.__wrapped__ = function
        self.__doc__ = function.__doc__
        self._entries = entries
        self._chars = chars
        self._held = 0
        self._answers: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> T:
        """``function(text)``, from the cache when it was asked lately."""
        with self._lock:
            if text in self._answers:
                self._answers.move_to_end(text)
                return self._answers[text]
        answer = self.__wrapped__(text)
        if len(text) > self._chars // 8:  # kept, it would drop an eighth of the rest
            return answer
        with self._lock:
            if text not in self._answers:
                self._answers[text] = answer
                self._held += len(text)
                while len(self._answers) > self._entries or self._held > self._chars:
                    dropped, _ = self._answers.popitem(last=False)
                    self._held -= len(dropped)
        return answer

    def cache_clear(self) -> None:
        """Forget every answer."""
        with self._lock:
            self._answers.clear()
            self._held = 0

    @property
    def held(self) -> tuple[int, int]:
        """How many texts, and how many characters of them, the cache holds."""
        with self._lock:
            return len(self._answers), self._held


def per_text(entries: int, chars: int = CACHED_CHARS) -> Callable[[Callable[[str], T]], PerText[T]]:
    """Cache a function of one text, keeping at most ``entries`` texts and ``chars``
    characters of them (a text longer than an eighth of ``chars`` is answered, not kept)."""

    def wrap(function: Callable[[str], T]) -> PerText[T]:
        return PerText(function, entries=entries, chars=chars)

    return wrap


__all__ = ["CACHED_CHARS", "PerText", "per_text"]
