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

_USER_WORDS = r"user(?:name)?|login|usr|uporabnik|korisnik|gebruiker|benutzer|utilisateur"
_SECOND_WORDS = (
    r"pass(?:word)?|passwd|pwd|pw|wachtwoord|geslo|lozinka|passwort|senha|contrase[ñn]a"
    r"|mot de passe"
)
_STEMS = ("pass", "pw", "wacht", "geslo", "lozinka", "senha", "contras")
_VALUE = r"(?P<pw>[^\s,;|'\"()]{6,128})"
# Matched on the lowered text; the value is read from the text at the same offsets.
_PAIR = re.compile(
    rf"\b(?:{_USER_WORDS})[ \t]*[:=]?[ \t]*[^\s/,;|]{{1,64}}[ \t]*[/,;|][ \t]*"
    rf"(?:{_SECOND_WORDS})\b[ \t]*[:=]?[ \t]*" + _VALUE
)
_NAMED_FOR = re.compile(
    rf"\b(?:{_SECOND_WORDS})[ \t]+for[ \t]+[^\n:=]{{1,40}}?[ \t]*:[ \t]*" + _VALUE
)


def find_pairs(t: Text) -> Iterator[Span]:
    text, lower = t.raw, t.lower
    if len(lower) != len(text) or not any(stem in lower for stem in _STEMS):
        return
    patterns = (_PAIR, _NAMED_FOR) if " for " in lower else (_PAIR,)
    for pattern in patterns:
        for m in pattern.finditer(lower):
            start = m.start("pw")
            value = text[start : m.end("pw")].rstrip(".:")
            end = start + len(value)
            next_char = text[end] if end < len(text) else ""
            if secret_value_ok(value, "password", next_char, bare=True):
                yield PiiKind.SECRET_ASSIGNMENT, start, end
