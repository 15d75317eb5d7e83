"""Secrets known by their name: values assigned to a secret-looking name.

They are reported as ``secret_assignment``, and so are ``Authorization: Bearer ...`` and
``Basic ...`` header values. The rule is in the package docstring: which names count, which
values are placeholders or references, and the length and entropy a value needs.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import re
from collections.abc import Callable, Iterator

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import char_classes, entropy, folded, is_placeholder

# Words for a password in other languages (written without diacritics, as in config).
_FOREIGN_PASSWORDS = (
    "parola", "heslo", "haslo", "senha", "clave", "contrasena", "wachtwoord", "salasana",
    "sifre", "jelszo", "lozinka", "geslo", "kodeord", "adgangskode", "kennwort", "losenord",
    "parool", "lykilord", "slaptazodis", "parole", "passe", "mdp", "passwort",
)  # fmt: skip
# The same words as written with their letters (the name splitter reads ASCII words only).
_ACCENTED_PASSWORDS = tuple(map(folded, (
    "hasło", "contraseña", "şifre", "jelszó", "lösenord", "пароль", "パスワード", "비밀번호",
    "密码", "密碼", "סיסמה", "סיסמא", "كلمة المرور", "كلمة السر", "κωδικός", "mật khẩu", "รหัสผ่าน",
    # Arabic's "word of the secret" in Latin letters (Darija, Tunisian, Levantine), several
    # words like the names above, so matched the same way
    "kalimat as-sir", "kalimat al-sir", "kalimat sir", "kelmet esser", "kilmet el-ser",
)))  # fmt: skip
_SECRET_STEMS = (
    "key", "secret", "token", "pass", "pwd", "pw", "cred", "sessionid", "seed", "psk",
    *_FOREIGN_PASSWORDS, *_ACCENTED_PASSWORDS,
)  # fmt: skip
_ASSIGNMENT = re.compile(
    r"(?<![\w.\-])"
    r"(?P<key>(?:[A-Za-z]{2,12} )?[\w.\-]{0,40}?"
    r"(?i:key|secret|token|pass|pwd|pw|credentials?|creds|sessionid|seed|psk|"
    + "|".join((*_FOREIGN_PASSWORDS, *_ACCENTED_PASSWORDS))
    + r")"
    r"[\w.\-]{0,40}(?:[ \t](?i:wi-?fi|wlan))?)"  # "mot de passe wifi du salon est …"
    r"(?:(?P<gap>(?:[ \t]+(?:for|of|on|at|to|in|do|na|za|pro|zu|pour|para|per|voor|til"
    r"|de|du|des|del|della|der|dem|den|für|fuer|от|для|від|dyal|mta3|ta3)[ \t]"
    r"|[ \t]+(?:dell|dall|nell|sull|all|d|l)'(?=[^\W\d_])"  # Italian and French elisions
    r")(?:[^.\n:=;,\"'`]|'(?=[^\W\d_])){1,60}?)?"
    r"[\"']?(?:[ \t]{0,3}(?::=|=>|=|:)[ \t]{0,3}"
    r"|[ \t]+(?:is|was|est|ist|es|è|é|lautet)(?:[ \t]+(?:now|nu|jetzt|ahora|agora|ora))?[ \t]+"
    r"|[ \t]+(?:(?:got|was|has been|is)[ \t]+)?(?:reset|changed|set|updated|rotated)[ \t]+to[ \t]+"
    # "changed to" in Polish, Portuguese, Spanish, Dutch, German and French
    r"|[ \t]+(?:zmienion[eay]|ustawion[eay]|trocad[ao]|alterad[ao]|mudad[ao]|cambiad[ao]"
    r"|gewijzigd|ge(?:ä|ae)ndert|chang[ée]e?|modifi[ée]e?)[ \t]+(?:na|para|a|in|naar|auf|en)[ \t]+)"
    r"|[\"']?(?P<loose>[ \t]+))"
    r"(?:\"(?P<dq>[^\"\n]{1,512})\"|'(?P<sq>[^'\n]{1,512})'|`(?P<bq>[^`\n]{1,512})`"
    r"|(?P<bare>[^\s\"'`,;(){}\[\]<>]{1,512}))"
)
# A secret named by an element or a variable around its value: <password>…</password>,
# variable "db_password" { default = "…" } (Terraform).
_ELEMENT = re.compile(
    r"<(?P<name>[\w.\-]{1,60})>(?P<v>[^<\n]{1,512})</(?P=name)>"
    r"|<(?P<tag>[\w.\-]{1,30})[ \t]+(?:name|key)=\"(?P<attr>[\w.\-]{1,80})\"[ \t]*>"
    r"(?P<av>[^<\n]{1,512})</(?P=tag)>"
    r"|variable\s{1,8}\"(?P<var>[\w.\-]{1,60})\"\s{0,8}\{[^}\n]{0,200}?"
    r"\bdefault\s{0,8}=\s{0,8}\"(?P<dv>[^\"\n]{1,512})\""
)
# A name and its value given as two attributes or fields: <add key="ApiSecret" value="…" />,
# {"name": "DB_PASSWORD", "value": "…"} (Kubernetes env, .NET appSettings).
_KEY_VALUE = re.compile(
    r"[\"']?(?:key|name)[\"']?\s{0,16}[=:]\s{0,16}[\"'](?P<name>[\w.\-]{1,60})[\"']"
    r"\s{0,16}(?:,\s{0,16})?"
    r"[\"']?value[\"']?\s{0,16}[=:]\s{0,16}[\"'](?P<v>[^\"'\n]{1,512})[\"']"
)
# What follows a header value cut short where its secret part was left out.
_REDACTED_NEXT = frozenset({"<", "*", "[", "\N{HORIZONTAL ELLIPSIS}"})
_AUTH_HEADER = re.compile(r"(?<![\w\-])(?:[Bb]earer|Basic)[ \t]+(?P<v>[A-Za-z0-9._~+/\-]{12,}=*)")
_WIFI = re.compile(r"\b(?:wi-?fi|wlan|ssid|wpa2?|router)\b")
_IDENT_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_PASSWORD_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "passwordnya",  # Indonesian: "its password"
        "pw",
        "passcode",
        "psk",
        *_FOREIGN_PASSWORDS,
    }
)
# In a bare value, "&name=" starts the next parameter of a query string.
_NEXT_PARAMETER = re.compile(r"&(?=[A-Za-z_][\w.\-]*=)")
_SECRET_WORDS = frozenset(
    {"secret", "token", "apikey", "credential", "credentials", "creds", "sessionid", "seed"}
)
_KEY_QUALIFIERS = frozenset(
    {
        "api", "access", "secret", "private", "signing", "encryption", "master", "auth",
        "session", "license", "licence", "client", "app", "service", "account", "webhook",
        "hmac", "jwt", "admin", "root", "deploy", "subscription", "consumer", "x", "device",
        "network", "shared", "server",
    }
)  # fmt: skip
_METADATA_WORDS = frozenset(
    {
        "hash", "hashed", "digest", "checksum", "sha", "sha1", "sha256", "sha512", "md5",
        "fingerprint", "name", "names", "type", "file", "path", "url", "uri", "endpoint", "id",
        "ids", "length", "len", "count", "max", "min", "limit", "expiry", "expires",
        "expiration", "ttl", "timeout", "policy", "header", "field", "prefix", "format",
        "version", "rotation", "env", "var", "ref", "arn", "dir", "enabled", "required", "hint",
        "label", "pattern", "reset", "strength", "algorithm", "alg", "size", "public", "tokens",
        "usage", "budget", "kid", "location", "vault", "manager", "store", "provider", "mask",
        "rule", "rules", "regex", "scope", "scopes", "lifetime", "age", "last",
        "changed", "updated", "created", "rotated", "manual", "manuals", "keys", "existing",
    }
)  # fmt: skip
# Words that make a "pass" after them a verb ("she lets pass is …", "what they will pass is …").
_VERBAL_BEFORE_PASS = frozenset(
    {
        "let", "lets", "letting", "to", "will", "would", "can", "could", "cannot", "must",
        "may", "might", "should", "shall", "did", "do", "does", "not", "never", "i", "we",
        "you", "they", "she", "he", "it",
    }
)  # fmt: skip
_A_WORD = re.compile(r"[^\W\d_]+(?:[-'\u2019][^\W\d_]+)*")
_WORDY = re.compile(r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]+)(?:[\-_. /](?:[a-z]+|[A-Z][a-z]+|[A-Z]+))*")
_REFERENCE = re.compile(r"[A-Za-z_]+\d{0,2}(?:\.[A-Za-z_]+\d{0,2})+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_OBJECT_ID = re.compile(
    r"(?:tok|pm|cus|acct|ch|pi|src|card|seti|sub|prod|price|evt|req|txn|py|re|po)_[A-Za-z0-9]{8,32}"
)
_CALLABLE = re.compile(r"[A-Za-z_][\w.]*")
_DIGEST = re.compile(r"(?i)^(?:sha\d*|md5|blake2\w*)[:\-]")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-]+")


def key_class(key: str, *, wifi: bool = False) -> str | None:
    """``"password"``, ``"secret"`` or None for the name on the left of an assignment; a
    lone ``key`` in a text about a wireless network is its password ("SSID … key: …")."""
    words = [w.lower() for w in _IDENT_WORD.findall(key)]
    if any(w in _METADATA_WORDS for w in words):
        return None
    if any(word in key.lower() for word in _ACCENTED_PASSWORDS):
        return "password"  # also a name of no ASCII word at all ("管理画面のパスワード")
    if not words:
        return None
    if wifi and words == ["key"]:
        return "password"
    if any(w in _PASSWORD_WORDS or w.endswith(("password", "passwd")) for w in words):
        return "password"
    if any(w in _SECRET_WORDS or w.endswith(("secret", "token", "apikey")) for w in words):
        return "secret"
    for before, word in itertools.pairwise(words):
        if word == "key" and before in _KEY_QUALIFIERS:
            return "secret"
    if len(words) > 1 and words[-1] == "key" and key.isupper():
        return "secret"  # an environment variable such as OPENAI_KEY or MAPBOX_KEY
    if words[-1] == "key":
        return "any key"  # "Cohere rerank key: …": secret only if its value is a random token
    return None


def _loosely(key_class: str) -> str | None:
    """The class of a name separated from its value by a space only: its values must look
    random; a key of no known kind then names no secret ("project key phc_…" is public)."""
    if key_class == "any key":
        return None
    return "loose password" if key_class == "password" else "loose"


def _decodes_to_placeholder(value: str) -> bool:
    """True if ``value`` is base64 of a placeholder (a Kubernetes secret holding ``password``)."""
    if len(value) % 4 or not _BASE64.fullmatch(value):
        return False
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return decoded.isprintable() and is_placeholder(decoded)


def secret_value_ok(value: str, key_class: str, next_char: str, *, bare: bool) -> bool:
    """The entropy rule of the module docstring, applied to one assigned value."""
    if (next_char in {"(", "["} and _CALLABLE.fullmatch(value)) or is_placeholder(value):
        return False  # a call or subscript (get_password(), env["X"]) is no value
    if bare and _REFERENCE.fullmatch(value):
        return False
    if "://" in value or value.startswith(("/", "./", "~/")) or _DIGEST.match(value):
        return False
    if value.startswith(("pk.eyJ", "pk_live_", "pk_test_")) or _OBJECT_ID.fullmatch(value):
        # a Mapbox or Stripe publishable key, meant to ship in clients (their secrets are
        # "sk." and "sk_"); a payment object's id or a card's vault token (tok_…, pm_…, cus_…)
        return False
    if _decodes_to_placeholder(value):
        return False
    if key_class == "any key":  # a key of no known kind: "rerank key: XVJFmxWg8WEE…"
        return (
            len(value) >= 24
            and entropy(value) >= 4.0
            and _TOKEN_CHARS.fullmatch(value) is not None
            and any(c.isupper() for c in value)  # mixed case: not a hex digest nor a UUID
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        )
    if key_class == "loose password":  # "password &HtB6a6vh3K9i!2", passphrase "8rEf…"
        return len(value) >= 8 and char_classes(value) >= 3 and entropy(value) >= 3.0
    if key_class == "loose":  # name and value separated by a space only: "api key 4f9b..."
        return (
            len(value) >= 20
            and entropy(value) >= 3.5
            and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value)
        )
    if key_class == "password":
        return len(value) >= 8 and entropy(value) >= 2.5 and char_classes(value) >= 2
    return (
        len(value) >= 12
        and entropy(value) >= 3.0
        and not value.isdigit()
        and _WORDY.fullmatch(value) is None
    )


def _name_starts(text: str, lower: str) -> set[int]:
    """Where names holding a secret stem start: the stem's word, and the word before it."""
    starts: set[int] = set()
    for stem in _SECRET_STEMS:
        at = lower.find(stem)
        while at >= 0:
            word = at
            while (
                word > 0
                and at - word < 40
                and (text[word - 1].isalnum() or text[word - 1] in "_.-")
            ):
                word -= 1
            starts.add(word)
            if word >= 3 and text[word - 1] == " ":  # two-word names: "api key", "db password"
                prev = word - 1
                while (
                    prev > 0
                    and word - prev < 13
                    and text[prev - 1].isascii()
                    and text[prev - 1].isalpha()
                ):
                    prev -= 1
                if word - 1 - prev >= 2:
                    starts.add(prev)
            at = lower.find(stem, at + len(stem))
    return starts


def _assignment_candidates(t: Text) -> Iterator[int]:
    """Offsets to try the assignment pattern at, in order."""
    if not any(stem in t.lower for stem in _SECRET_STEMS):
        return
    if len(t.lower) != len(t.raw):  # lower() changed offsets (rare scripts): try every match
        yield from (m.start() for m in _ASSIGNMENT.finditer(t.raw))
        return
    yield from sorted(_name_starts(t.raw, t.lower))


def find_assignments(t: Text) -> Iterator[Span]:
    text = t.raw
    claimed = 0  # end of the last reported value; names inside it are part of the value
    wifi = _WIFI.search(t.lower) is not None
    # The last name classed and the last value judged, with their answers: a name repeated
    # ("key=key=…") gives one value to every occurrence after it until the value's end, and
    # judging a value of 500 characters each time cost the screen ten times prose.
    named: tuple[str, str | None] = ("", None)
    judged: tuple[tuple[str, str, str, bool], bool] | None = None
    for at in _assignment_candidates(t):
        if at and text[at - 1] in "{%":
            continue  # a variable's name inside a template (${DB_PASSWORD:?required}), no value
        if text.rfind("arn:", max(0, at - 120), at) > text.rfind(" ", 0, at):
            continue  # a part of an ARN (arn:aws:secretsmanager:…:secret:name): a reference
        m = _ASSIGNMENT.match(text, at) if at >= claimed else None
        if m is None:
            continue
        name = m.group("key")
        named = named if named[0] == name else (name, key_class(name, wifi=wifi))
        kind = named[1]
        if m.group("loose") is not None and kind is not None:
            kind = _loosely(kind)
        if kind is None:
            continue
        group = next(g for g in ("dq", "sq", "bq", "bare") if m.group(g) is not None)
        if at and text[at - 1] == "$" and group not in ("dq", "sq"):
            continue  # a shell variable read ($DB_PASSWORD), not PHP's $dbPass = '…'

        value = m.group(group)
        start = m.start(group)
        if group == "bare":
            value = _NEXT_PARAMETER.split(value, maxsplit=1)[0].rstrip(".,:;")
        else:
            lead = len(value) - len(value.lstrip())
            start += lead
            value = value.strip()
        end = start + len(value)
        if _pass_as_verb(text, at, m.group("key")) and _said(text[m.end("key") : start], value):
            continue
        next_char = text[end] if group == "bare" and end < len(text) else ""
        question = (value, kind, next_char, group == "bare")
        judged = (
            judged
            if judged is not None and judged[0] == question
            else (question, secret_value_ok(value, kind, next_char, bare=group == "bare"))
        )
        if judged[1]:
            claimed = end
            yield PiiKind.SECRET_ASSIGNMENT, start, end
    yield from _key_value_pairs(t)
    yield from _files_of_secrets(t)
    yield from _short_secrets(t)
    yield from _auth_headers(t)


def _pass_as_verb(text: str, at: int, key: str) -> bool:
    """True if the name ``key`` (found at ``at``) is "pass" used as a verb: after "lets",
    "will", "to"... in the name or just before it ("the one thing she lets pass is Parmesan")."""
    words = key.lower().split()
    if words[-1:] != ["pass"]:
        return False
    if len(words) > 1:
        return words[-2] in _VERBAL_BEFORE_PASS
    preceding = text[max(0, at - 16) : at].lower().split()
    return bool(preceding) and preceding[-1] in _VERBAL_BEFORE_PASS


def _said(separator: str, value: str) -> bool:
    """Whether a value after "pass" used as a verb is said, not assigned: no ':' or '='
    before it, and a word (letters, hyphens, apostrophes: "Parmesan", "Grade-B"). A secret
    after such a "pass" ("to pass: hunter22", "we pass Tr0ub4dor&3") is still one."""
    return ":" not in separator and "=" not in separator and _A_WORD.fullmatch(value) is not None


def _auth_headers(t: Text) -> Iterator[Span]:
    """``Authorization: Bearer …`` and ``Basic …`` values."""
    if "bearer" not in t.lower and "basic" not in t.lower:
        return
    text = t.raw
    for m in _AUTH_HEADER.finditer(text):
        if text[m.end() : m.end() + 1] in _REDACTED_NEXT:
            continue  # "Bearer eyJhbGciOiJIUzI1NiJ9.<redacted>": the secret part is not there
        if secret_value_ok(m.group("v"), "secret", "", bare=False):
            yield PiiKind.SECRET_ASSIGNMENT, m.start("v"), m.end("v")


# A .pgpass line (host:port:database:user:password) and a registry login in a docker
# config.json ("auth": base64 of user:password).
_PGPASS = re.compile(r"(?<![\w.])[\w.\-]+:\d{2,5}:[^:\s]+:[^:\s]+:(?P<v>[^\s:]{6,})")
_DOCKER_AUTH = re.compile(r"\"auth\"\s{0,8}:\s{0,8}\"(?P<v>[A-Za-z0-9+/]{12,}={0,2})\"")
# A MySQL or MariaDB client given its password on the command line: "-p" and the password
# with no space between them ("-p'jiAc…'", "-pS3cr3t"), after the command's name.
_MYSQL_PASSWORD = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n|;&]{0,80}?"
    r"(?<=\s)-p(?:'(?P<q>[^'\s]{4,})'|\"(?P<d>[^\"\s]{4,})\"|(?P<v>[^\s'\"-][^\s'\"]{3,}))"
)


def _files_of_secrets(t: Text) -> Iterator[Span]:
    """The password of a .pgpass line, a docker config.json login and a MySQL client's
    ``-p`` password."""
    if "mysql" in t.lower or "mariadb" in t.lower:
        for m in _MYSQL_PASSWORD.finditer(t.raw):
            group = next(g for g in ("q", "d", "v") if m.group(g))
            if secret_value_ok(m.group(group), "password", "", bare=True):
                yield PiiKind.SECRET_ASSIGNMENT, m.start(group), m.end(group)
    if "pgpass" in t.lower:
        for m in _PGPASS.finditer(t.raw):
            if secret_value_ok(m.group("v"), "password", "", bare=True):
                yield PiiKind.SECRET_ASSIGNMENT, m.start("v"), m.end("v")
    if '"auth"' in t.raw:
        for m in _DOCKER_AUTH.finditer(t.raw):
            try:
                user, _, password = base64.b64decode(m.group("v")).decode("utf-8").partition(":")
            except (binascii.Error, ValueError):
                continue
            if user and not is_placeholder(password) and len(password) >= 6:
                yield PiiKind.SECRET_ASSIGNMENT, m.start("v"), m.end("v")


def _key_value_pairs(t: Text) -> Iterator[Span]:
    """Values of secret names given as two fields (``key="ApiSecret" value="…"``), as an
    element (``<password>…</password>``) or as a Terraform variable's default."""
    if "value" in t.lower:
        for m in _KEY_VALUE.finditer(t.raw):
            kind = key_class(m.group("name"))
            if kind and secret_value_ok(m.group("v"), kind, "", bare=False):
                yield PiiKind.SECRET_ASSIGNMENT, m.start("v"), m.end("v")
    if "</" not in t.raw and "default" not in t.lower:
        return
    for m in _ELEMENT.finditer(t.raw):
        name, value = (
            ("name", "v")
            if m.group("name")
            else ("attr", "av")
            if m.group("attr")
            else ("var", "dv")
        )
        kind = key_class(m.group(name))
        if kind and secret_value_ok(m.group(value), kind, "", bare=False):
            yield PiiKind.SECRET_ASSIGNMENT, m.start(value), m.end(value)


# Short secrets that only their name makes secret: a card or banking PIN ("ATM pin is 7391";
# a postal "PIN code" is not one), backup or recovery codes, an authenticator's seed written
# in groups of four ("PYUH 5CT4 N4P3 …"), a game server's login token, and session cookies in
# a Cookie header.
_PIN = re.compile(
    r"(?i)\b(?:(?:atm|card|debit|credit|upi|bank|banking|sim|phone|app)[ \-]?pin|m-?pin|t-?pin)"
    r"(?:[ \t]+(?:number|no\.?))?[ \t]*(?:is|was|=|:|-|na|ay)[ \t]*(?P<v>\d{4,6})(?![\w\-])"
)
# A code that opens a place or unlocks a device's controls: "garage keypad code is 7741#",
# "parental-control PIN: 5820", "alarm code 40912" (digits, perhaps ending in # or *).
_ACCESS_CODE = re.compile(
    r"(?i)\b(?:door|gate|garage|keypad|alarm|safe|locker|lockbox|key[ \-]?safe|entry"
    r"|parental(?:[ \-]control)?)[ \-](?:pin|code|passcode|combination)"
    r"(?:[ \t]+(?:number|no\.?))?[ \t]*(?:is|was|=|:|-)[ \t]*(?P<v>\d{3,8}[#*]?)(?![\w\-])"
)
# A BitLocker recovery key: eight groups of six digits, each a multiple of 11 below 720,896.
_RECOVERY_KEY = re.compile(r"(?<![\d\-])(?P<v>\d{6}(?:-\d{6}){7})(?![\d\-])")
_BACKUP_CODES = re.compile(
    r"(?i)\b(?:backup|recovery|2fa|mfa|one-time)[ \t]+codes?\b[^\n]{0,24}?"
    r"(?P<v>(?<![\w\-])(?=[a-z0-9\-]*\d)[a-z0-9]{4,5}-?[a-z0-9]{4,5}(?![\w\-])"
    r"(?:[ \t]*,[ \t]*[a-z0-9]{4,5}-?[a-z0-9]{4,5}(?![\w\-]))*"
    r"|(?<!\d)\d{4} \d{4}(?:[ \t]{1,3}\d{4} \d{4})+(?!\d))"
)
_GROUPED_SEED = re.compile(
    r"(?i:\b(?:seed|secret|authenticator|totp|2fa|mfa)\b)[^\n]{0,48}?"
    r"(?<![A-Za-z0-9])(?P<v>(?:[A-Z2-7]{4}[ \t]){3,}[A-Z2-7]{4})(?![A-Za-z0-9])"
)
_BRACKETED = re.compile(
    r"(?i)\b(?:password|passcode|passphrase|pwd|pin)[ \t]*\((?P<v>[^\s()]{6,64})\)"
)
# A login given as "user / password": "Epic test login for the new MA is dhall / yJnalF_7LY*5M!".
_LOGIN_PAIR = re.compile(
    r"(?i)\b(?:login|credentials?|creds|sign-?in)\b[^\n]{0,40}?(?:\bis|\bare|:)[ \t]+"
    r"[\w.@\-]{2,64}[ \t]*/[ \t]*(?P<v>[^\s;,]{6,64})"
)
# A Source-engine game server's login token given on its command line.
_STEAM_LOGIN = re.compile(r"\bsv_setsteamaccount[ \t]+(?P<v>[A-Fa-f0-9]{32})(?![\w\-])")
_COOKIE = re.compile(r"(?i)\b(?:set-)?cookie:[ \t]*(?P<v>[^\n]{1,2048})")
_COOKIE_PAIR = re.compile(r"(?P<name>[^\s=;,]{1,64})=(?P<value>[^\s;,]{1,512})")


def _random_seed(value: str) -> bool:
    """Base32 with a digit in it: capitals alone are as often words ("KEEP THIS FILE AWAY")."""
    return any(c in "234567" for c in value) and entropy(value.replace(" ", "")) >= 3.0


def _recovery_key(value: str) -> bool:
    return all(int(group) % 11 == 0 and int(group) < 720_896 for group in value.split("-"))


def _bracketed_password(value: str) -> bool:
    return secret_value_ok(value, "password", "", bare=False)


#: (words one of which the text must hold, the pattern, a test of its value or None)
_SHORT: tuple[tuple[tuple[str, ...], re.Pattern[str], Callable[[str], bool] | None], ...] = (
    (("pin",), _PIN, None),
    (("pin", "code", "combination"), _ACCESS_CODE, None),
    (("-",), _RECOVERY_KEY, _recovery_key),
    (("code",), _BACKUP_CODES, None),
    (("seed", "secret", "authenticator", "totp", "2fa", "mfa"), _GROUPED_SEED, _random_seed),
    (("(",), _BRACKETED, _bracketed_password),
    (("login", "credential", "creds", "sign-in", "signin"), _LOGIN_PAIR, _bracketed_password),
    (("sv_setsteamaccount",), _STEAM_LOGIN, None),
)


def _short_secrets(t: Text) -> Iterator[Span]:
    for words, pattern, ok in _SHORT:
        if any(word in t.lower for word in words):
            for m in pattern.finditer(t.raw):
                if ok is None or ok(m.group("v")):
                    yield PiiKind.SECRET_ASSIGNMENT, m.start("v"), m.end("v")
    if "cookie" not in t.lower:
        return
    for header in _COOKIE.finditer(t.raw):
        for pair in _COOKIE_PAIR.finditer(header.group("v")):
            value = pair.group("value")
            if secret_value_ok(value, "secret", "", bare=False):
                at = header.start("v") + pair.start("value")
                yield PiiKind.SECRET_ASSIGNMENT, at, at + len(value)
