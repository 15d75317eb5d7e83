"""Secrets written in source code's own idioms, where the name and the value are not side by
side as in a config file (``secret_assignment``):

- a typed declaration: ``let secret: &str = "…"`` (Rust), ``val jdbcPassword: String = "…"``
  (Kotlin, Scala, Swift, TypeScript);
- a value injected into a field by an annotation: ``@Value("…") private String
  ldapBindPassword;`` (Spring);
- a password given on a command line: ``sshpass -p '…'``, ``mysql -u app -p'…'``;
- PowerShell's ``ConvertTo-SecureString "…" -AsPlainText``.

The name must be a secret's and the value must pass the same rule as an assignment's
(:mod:`~engram.memory.gate.pii.assignments`): placeholders and references are no secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram.memory.gate.pii.assignments import key_class, secret_value_ok
from engram.memory.gate.pii.findings import PiiKind, Span, Text

_QUOTED = r"(?:\"(?P<dq>[^\"\n]{1,512})\"|'(?P<sq>[^'\n]{1,512})')"
_TYPED = re.compile(
    r"(?<![\w.])(?P<name>[A-Za-z_]\w{0,60})[ \t]*:[ \t]*&?(?:'static[ \t]+)?"
    r"[A-Za-z_][\w<>\[\]?.]{0,30}[ \t]*=(?!=)[ \t]*" + _QUOTED
)
_ANNOTATED = re.compile(
    r"@Value\([ \t]*" + _QUOTED + r"[ \t]*\)[ \t]+(?:(?:private|public|protected|final|static)"
    r"[ \t]+)*[\w<>\[\]]{1,40}[ \t]+(?P<name>[A-Za-z_]\w{0,60})"
)
_COMMAND = re.compile(
    r"\b(?:sshpass[ \t]+-p[ \t]*|mysql(?:dump|admin)?\b[^\n|;]{0,80}?[ \t]-p"
    r"|ConvertTo-SecureString[ \t]+(?:-String[ \t]+)?)" + _QUOTED
)


def find_code_secrets(t: Text) -> Iterator[Span]:
    text, lower = t.raw, t.lower
    if ":" in text and "=" in text:
        for m in _TYPED.finditer(text):
            yield from _named(m)
    if "@value(" in lower:
        for m in _ANNOTATED.finditer(text):
            yield from _named(m)
    if "sshpass" in lower or "mysql" in lower or "convertto-securestring" in lower:
        for m in _COMMAND.finditer(text):
            group = "dq" if m.group("dq") is not None else "sq"
            if secret_value_ok(m.group(group), "password", "", bare=False):
                yield PiiKind.SECRET_ASSIGNMENT, m.start(group), m.end(group)


def _named(m: re.Match[str]) -> Iterator[Span]:
    """The value of a match whose ``name`` is a secret's, when it looks like one."""
    kind = key_class(m.group("name"))
    group = "dq" if m.group("dq") is not None else "sq"
    value = m.group(group)
    if kind is not None and kind != "any key" and secret_value_ok(value, kind, "", bare=False):
        yield PiiKind.SECRET_ASSIGNMENT, m.start(group), m.end(group)
