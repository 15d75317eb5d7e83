"""PII rules from writers mm (secrets in source code's idioms) and nn (details shared past a
platform's filter): typed declarations, Spring's @Value, sshpass and mysql passwords,
PowerShell secure strings, PHP variables, snake_case id names, SDK credential constructors;
digits split by emoji or written with look-alike letters, number words mixed with digits,
addresses spelled a character at a time, payment apps' banks, PINs said with "na"; and what
is none of these. Values are made up here."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from engram.memory.gate.pii.evasion import mixed_runs


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


FOUND = [
    ('    let secret: &str = "pQ7v!K2xLm9Z";', "secret_assignment"),
    ('val jdbcPassword: String = "Hx8#rT2vWq4Z"', "secret_assignment"),
    ('@Value("Zr4!kP9qWx2L") private String ldapBindPassword;', "secret_assignment"),
    ("sshpass -p 'Tq7!mR2xVb9K' ssh deploy@203.0.113.7 uptime", "secret_assignment"),
    ("mysql -u app -p'Lk3#vN8qXz2P' -h db.internal shop", "secret_assignment"),
    ('$pw = ConvertTo-SecureString "Wq5!zT8rKm3X" -AsPlainText -Force', "secret_assignment"),
    ("$dbPass = 'Mn4+rX7!qz9T';", "secret_assignment"),
    ('REDIS_PASSWORD: "%7bLq2Vz#9pWx4T"', "secret_assignment"),
    ('assert validate_bsn("111222333") is True', "national_id"),
    (
        'new BasicAWSCredentials(id, "Tq9vX2mLk8Zr4Wp7Bn3Yc6Hd1Fg5Js0Ka2Qe8Ui4")',
        "aws_secret_access_key",
    ),
    (("call me 2\ufe0f\u20e31\ufe0f\u20e32\ufe0f\u20e3 6\ufe0f\u20e33\ufe0f\u20e38\ufe0f\u20e3 "
     "4\ufe0f\u20e31\ufe0f\u20e39\ufe0f\u20e30\ufe0f\u20e3 after 6pm"), "phone"),
    ("whatsapp me: 0917 \u2b50 582 \u2b50 3046", "phone"),
    ("my cell is four one five, 83O - 22 seven 4", "phone"),
    ("text me on whatsapp 9 8 1 O 4 4 7 2 6 3", "phone"),
    ("reach me: k a y l a h . m o s s 8 @ y a h o o . c o m", "email"),
    ("acct no. 0064 1023 8857 at BDO, pangalan Jericho", "bank_account"),
    ("my bank app PIN na 5093, abeg no tell anybody", "secret_assignment"),
    ("akun aku, passwordnya: Mawar@Merah99", "secret_assignment"),
    ("kak chat wa aja ya nol delapan satu dua, tujuh tujuh tiga, dua sembilan satu lima",
     "phone"),
]  # fmt: skip

NOT_FOUND = [
    'let secret: &str = env!("API_SECRET");',
    'val jdbcPassword: String = System.getenv("JDBC_PASSWORD")',
    'sshpass -p "$SSH_PASS" ssh deploy@host',
    "Board call Meeting ID 842 1937 5580; passcode in the invite",
    "Phone interview scheduled 15:00\u201315:45 EET, link in the calendar",
    "Buyer phone shows as +62 812-****-7781 in the seller view, by design",
    "decorated with @app.route('/healthz') and @limiter.exempt",
    "Ask @jana.novak and @marko about the deadline",
    "price 3 🍎 for 2 euros, 5 🍐 for 4 euros",
]


@pytest.mark.parametrize(("text", "kind"), FOUND)
def test_found(text: str, kind: str) -> None:
    """Each value is reported with its kind."""
    assert kind in kinds(text)


@pytest.mark.parametrize("text", NOT_FOUND)
def test_not_found(text: str) -> None:
    """References, plain numbers and handles are not reported."""
    assert kinds(text) == set()


def test_a_plain_number_is_no_disguised_run() -> None:
    """Digits written plainly are the scan's own to read; only disguised runs are read again."""
    assert list(mixed_runs("call 0917 582 3046 or 0917-582-3046")) == []
    assert list(mixed_runs("call 0917 ⭐ 582 ⭐ 3046")) == [(5, 22, "09175823046")]


@pytest.mark.parametrize(
    "text",
    [
        "1 🍑 " * 50_000,
        "O l " * 50_000,
        "k a y " * 30_000 + "@ x . c o m",
        "a " * 60_000 + "!@ x . c o m",
        "one 1 " * 30_000,
    ],
)
def test_crafted_runs_scan_in_linear_time(text: str) -> None:
    """Long disguised runs cost no more than linear time."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < 2.0
