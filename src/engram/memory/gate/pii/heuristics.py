"""Tests on matched values and their context that several detectors share.

Shannon entropy and character classes tell a random value from a word, the placeholder test
tells a real value from a stand-in such as ``changeme`` or ``${VAR}``, and :func:`preceded_by`
looks for a context keyword in a window before a match.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable


def folded(keywords: str) -> str:
    """Keywords (or a pattern of them) in the form scanned text is read in: each non-ASCII
    character NFKC-normalised on its own, as the scanner folds text ("ำ" in Thai becomes
    two characters)."""
    return "".join(c if c.isascii() else unicodedata.normalize("NFKC", c) for c in keywords)


def entropy(value: str) -> float:
    """Shannon entropy of the characters of ``value``, in bits per character."""
    size = len(value)
    if size == 0:
        return 0.0
    return -sum(n / size * math.log2(n / size) for n in Counter(value).values())


def char_classes(value: str) -> int:
    """How many of lower case, upper case, digits and other characters occur in ``value``."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


_PLACEHOLDER_WORDS = frozenset(
    {
        "password", "passwd", "pass", "pwd", "pw", "secret", "token", "apikey", "api_key",
        "key", "changeme", "change_me", "null", "none", "nil", "undefined", "empty", "redacted",
        "hidden", "masked", "example", "sample", "dummy", "placeholder", "todo", "tbd", "test",
        "foo", "bar", "foobar", "xxx", "letmein", "default", "admin", "root", "user",
        "username", "mypassword", "mysecret", "yourpassword", "secret123", "password123",
    }
)  # fmt: skip
_PLACEHOLDER_MARKERS = re.compile(
    r"(?i)your[_\-]?|example|placeholder|changeme|change[_\-]me|redacted|dummy|sample|"
    r"xxxx|\*\*\*|\.\.\.|<|>|\$\{|\$\(|\{\{|%\(|^\$|^%[({]|^%\w+%$|^\{|^\[|insert[_\-]|replace[_\-]?me|"
    r"not[_\-]?a[_\-]?real|fake|notreal"
    r"|^vault:v\d+:"  # HashiCorp Vault transit ciphertext: encrypted, not a secret
)


#: A piece of text every unanchored marker holds, compared with the value in lower case; an
#: anchored marker starts with one of ``_ANCHORED``. A value holding none cannot match, so the
#: pattern (slow: it tries every marker at every character) is not run on it. A name joined
#: to values many times ("key=key=…", 4,000 values of 512 characters) cost the screen 1.7 s
#: on the event loop against 0.13 s for prose of the same size (hostile pass R).
_MARKER_HINTS = (
    "your", "example", "placeholder", "change", "redacted", "dummy", "sample", "xxxx", "***",
    "...", "<", ">", "${", "$(", "{{", "%(", "insert", "replace", "not", "fake", "vault",
)  # fmt: skip
_ANCHORED = frozenset("$%{[")
#: The letters IGNORECASE matches with an ASCII letter that ``str.lower`` does not give as
#: one (U+0130 lowers to two characters; a dotless i and a long s stay as they are).
_TO_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def is_placeholder(value: str) -> bool:
    """True for empty values, template variables and stand-ins such as ``changeme``."""
    stripped = value.strip().strip("\"'`")
    if not stripped or stripped.lower() in _PLACEHOLDER_WORDS:
        return True
    if len(set(stripped.lower())) <= 2:
        return True
    lowered = stripped.translate(_TO_ASCII).lower()
    if stripped[0] not in _ANCHORED and not any(hint in lowered for hint in _MARKER_HINTS):
        return False
    return _PLACEHOLDER_MARKERS.search(stripped) is not None


def preceded_by(pattern: re.Pattern[str], text: str, start: int, window: int) -> bool:
    """True if ``pattern`` occurs in the ``window`` characters before ``start``."""
    return pattern.search(text, max(0, start - window), start) is not None


def passes_check(check: Callable[[str], object], value: str) -> bool:
    """Whether a check-digit validator accepts ``value``; a validator's error on odd input
    (python-stdnum raises for some) means "not valid", never an error of the scan."""
    try:
        return bool(check(value))
    except Exception:  # noqa: BLE001 - see the docstring
        return False
