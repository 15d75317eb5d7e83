"""The words of a query worth a full-text match: exact, rare terms.

The full-text leg of hybrid search is good at what an embedding blurs: an error code
(``E4012`` against ``E4021``), a host name, a ticket number, a surname. On ordinary words it
adds little a sentence embedding does not already know, and costs a second query. So a query
has a text leg only when it holds such a term, and the leg matches those terms alone.

Which words are rare is decided from the query's own text and a fixed list of common English
words, never from statistics of the stored records: statistics of the whole table would let
records a caller may not read change which of its words count (and so its answer). A word is
*distinctive* when it

- holds a digit and is not a bare number of fewer than three digits or a year
  (``E4012``, ``v2.3.1``, ``8443``, ``INC-2231``);
- joins word characters with ``-``, ``_``, ``.``, ``/``, ``:`` or ``@`` inside it
  (``pay-gw-03.eu.internal``, ``max_pool_size``, ``s3://bucket``); or
- is a word of at least four letters that a general English vocabulary can only spell in
  ``MIN_PIECES`` or more pieces (``Okonkwo``, ``kubernetes``, ``idempotency``; not
  ``retry`` or ``webhook``, two pieces each, words common in the records agents write).

The vocabulary is the embedding model's WordPiece tokenizer's (30,522 entries chosen for
their frequency in general English text), which ships with the package; a word is spelled
with it greedily, longest entry first, as the tokenizer does.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

#: Most terms one query's text leg matches (the first ones, in query order).
MAX_TERMS = 8
#: Fewest vocabulary pieces that make a plain word rare.
MIN_PIECES = 3
#: Longest word spelled (WordPiece's own limit): spelling costs the cube of the length.
MAX_WORD_CHARS = 100
_VOCABULARY = ("model_data", "all-minilm-l6-v2", "vocab.txt")
_TOKEN = re.compile(r"\w(?:[\w\-./:@]*\w)?")
_JOINED = re.compile(r"\w[\-_./:@]\w")
_YEAR = re.compile(r"(?:19|20)\d\d")


@cache
def vocabulary() -> frozenset[str]:
    """The tokenizer's vocabulary entries (continuations keep their ``##``)."""
    resource = files("engram.infra")
    for part in _VOCABULARY:
        resource = resource / part
    return frozenset(resource.read_text(encoding="utf-8").split())


def pieces(word: str, entries: frozenset[str]) -> int:
    """How many vocabulary entries spell ``word`` (lower case), longest match first; a word
    with a character the vocabulary lacks counts one piece per remaining character."""
    count, start = 0, 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in entries:
                break
            end -= 1
        if end == start:
            return count + len(word) - start
        count, start = count + 1, end
    return count


def distinctive(
    token: str, entries: frozenset[str] | None = None, *, min_pieces: int = MIN_PIECES
) -> bool:
    """Whether one query token is an exact, rare term (see the module)."""
    if token.isdigit():
        return len(token) >= 3 and not (len(token) == 4 and _YEAR.fullmatch(token))
    if any(char.isdigit() for char in token) or _JOINED.search(token):
        return True
    word = token.lower()
    if not 4 <= len(word) <= MAX_WORD_CHARS or not word.isalpha():
        return False  # a longer word is one unknown piece to WordPiece, as it is here
    return pieces(word, vocabulary() if entries is None else entries) >= min_pieces


def distinctive_terms(
    query: str, *, limit: int = MAX_TERMS, min_pieces: int = MIN_PIECES
) -> list[str]:
    """The distinctive terms of ``query``, first seen first, each once (case ignored)."""
    entries = vocabulary()
    terms: list[str] = []
    seen: set[str] = set()
    for token in _TOKEN.findall(query):
        key = token.lower()
        if key in seen or not distinctive(token, entries, min_pieces=min_pieces):
            continue
        seen.add(key)
        terms.append(token)
        if len(terms) == limit:
            break
    return terms
