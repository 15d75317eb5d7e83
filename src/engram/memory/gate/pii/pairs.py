"""``secret_assignment`` in two more ways people write a password down:

- **A login's pair**: a user name and its password in one clause, the password word and its
  value apart by a space only (``user admin / pass GhlWMshfygOJ``, ``login kliniek,
  wachtwoord …``). Alone, a value after a bare space must look random to count
  (:mod:`~engram.memory.gate.pii.assignments`); the user name before it says what it is.
- **A password named for someone, then a colon**, in a line of any case, including one
  written all in capitals as telexes and ticket titles are (``CREW PORTAL PW FOR 2/O SANTOS:
  xm*%pNOxd``).

The value must pass the same rule as an assigned password: eight characters or more, two
character classes, not a placeholder nor a reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram.memory.gate.pii.assignments import secret_value_ok
from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import char_classes

_USER_WORDS = r"user(?:name)?|login|usr|uporabnik|korisnik|gebruiker|benutzer|utilisateur"
_SECOND_WORDS = (
    r"pass(?:word)?|passwd|pwd|pw|wachtwoord|geslo|lozinka|passwort|senha|contrase[ñn]a"
    r"|mot de passe"
)
_STEMS = ("pass", "pw", "wacht", "geslo", "lozinka", "senha", "contras")
# A value never starts with a hyphen: "password-reset-flow" is one word, not a pair.
_VALUE = r"(?P<pw>(?!-)[^\s,;|'\"()]{6,128})"
# Matched on the lowered text; the value is read from the text at the same offsets. Every
# gap is bounded (a few spaces or tabs), so a long run of blanks costs linear time.
_GAP = r"[ \t]{0,3}"
_END = r"(?![\w-])"  # the password word ends: not "pass-through", not "passport"
_PAIR = re.compile(
    rf"\b(?:{_USER_WORDS}){_GAP}[:=]?{_GAP}[^\s/,;|]{{1,64}}{_GAP}[/,;|]{_GAP}"
    rf"(?:{_SECOND_WORDS}){_END}{_GAP}[:=]?{_GAP}" + _VALUE
)
_NAMED_FOR = re.compile(
    rf"\b(?:{_SECOND_WORDS}){_END}[ \t]{{1,3}}for[ \t]{{1,3}}[^\n:=]{{1,40}}?:{_GAP}" + _VALUE
)


def find_pairs(t: Text) -> Iterator[Span]:
    text, lower = t.raw, t.lower
    if len(lower) != len(text) or not any(stem in lower for stem in _STEMS):
        return
    # A pair has its user name to say what the value is; a password named for someone has
    # only the words before it ("PASS FOR QA: all-tests-green" is a status), so its value
    # must also hold three kinds of character.
    patterns = [(_PAIR, 1)]
    if " for " in lower:
        patterns.append((_NAMED_FOR, 3))
    for pattern, classes in patterns:
        for m in pattern.finditer(lower):
            start = m.start("pw")
            value = text[start : m.end("pw")].rstrip(".:")
            end = start + len(value)
            next_char = text[end] if end < len(text) else ""
            if char_classes(value) >= classes and secret_value_ok(
                value, "password", next_char, bare=True
            ):
                yield PiiKind.SECRET_ASSIGNMENT, start, end
