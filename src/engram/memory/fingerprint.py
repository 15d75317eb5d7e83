"""Normalised content hashes: two texts that differ only in case, spacing or final punctuation
have the same fingerprint, so an exact duplicate is found with one index lookup."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?;:,]+$")


def normalise(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed, trailing punctuation dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACE.sub(" ", folded).strip())


def content_hash(text: str) -> bytes:
    """SHA-256 of the normalised text (32 bytes)."""
    return hashlib.sha256(normalise(text).encode()).digest()


_TOKEN = re.compile(r"[^\W_]+(?:[.'][^\W_]+)*")
#: Words that carry no claim. "to", "by", "for" and "with" are not among them: they say who
#: does what to whom ("sent to Acme" / "sent by Acme", "works with Bob" / "works for Bob").
_STOPWORDS = frozenset(
    {"a", "an", "the", "is", "are", "was", "were", "be", "been", "of", "in", "on", "at", "and",
     "or", "it", "its", "this", "that", "these", "those", "as"}
)  # fmt: skip


def _stem(token: str) -> str:
    for suffix in ("ies", "es", "s"):
        if len(token) > len(suffix) + 2 and token.endswith(suffix):
            return token[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return token


def significant_words(text: str) -> tuple[str, ...]:
    """Words that carry the claim, in order: case-folded, plural-stripped, stopwords dropped.

    Numbers and versions stay whole (``v2.0`` and ``v2.1`` differ), so two texts with equal
    sequences say the same thing in different spacing, case, articles or number; the order
    counts ("Alice reports to Bob" / "Bob reports to Alice", "03/04" / "04/03").
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return tuple(_stem(t) for t in _TOKEN.findall(folded) if t not in _STOPWORDS)


def significant_tokens(text: str) -> frozenset[str]:
    """The distinct :func:`significant_words` of a text."""
    return frozenset(significant_words(text))
