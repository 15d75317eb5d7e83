"""PII rules written from writers cc and dd (dev): Southeast Asian and Central European ids,
accounts with their own check digits, local phone numbers, a MySQL password on a command
line. Values are made up here, with valid check digits."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Seller NPWP 22.625.119.7-060.000, invoice under PKP review.", "national_id"),
        ("Her TAJ is 373-537-990; the clinic needs it before the visit.", "national_id"),
        ("Applicant No. KP 701005142662, identity verified by video call.", "national_id"),
        ("Buyer typed 4423667127684 in the ID field, photo matches.", "national_id"),
        ("New-style HETU 040619C0553 for the youngest, entered today.", "national_id"),
        ("Refund to účet 107-1819888006/0100 by Friday.", "bank_account"),
        ("Hungarian giro number 75116372-77065894 for the voucher refund.", "bank_account"),
        ("Rekening BCA 0538-09-687962-56-0 is closed, ask for another.", "bank_account"),
        ("midtrans server key = Mid-server-G9eh6Yo_4gfqrc5XlrWi0B26 (production)", "api_key"),
        ("history: mysql -h db1 -u root -p'u7Rq!x2LmZ0p' payroll < fix.sql", "secret_assignment"),
        ("Desk phone in the lab is 555-0187, extension 12.", "phone"),
        ("If the pager fails, text Marta directly at 518 6472.", "phone"),
    ],
)
def test_a_value_of_these_kinds_is_found(text: str, expected: str) -> None:
    """Each layout, with its word or its check, is reported as its kind."""
    assert expected in kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "mysql -u root -p payroll  (it asks for the password)",
        "mysqldump -p${DB_PASS} payroll > dump.sql",
        "Ticket 555-0187 was closed after the reboot.",
        "Page 107-1819888007/0100 of the scan is blurred.",
        "Order 75116372-77065895 shipped from Budapest.",
        "TAJ 373-537-991 was rejected as invalid.",
    ],
)
def test_a_look_alike_is_not_reported(text: str) -> None:
    """A prompt for the password, a variable, a ticket, and numbers whose checks fail."""
    assert set() == kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "mysql " * 30_000 + "-p",
        "mysql -u root " + "x" * 200_000 + " -pS3cr3tPassw0rd",
        "1-" * 100_000 + "/0800",
        "12345678-" * 20_000,
        "účet giro rekening " * 10_000,
        "Mid-server-" + "a" * 200_000,
        "desk phone " * 20_000 + "555-0187",
        "TAJ NPWP No. KP " * 10_000,
    ],
)
def test_crafted_runs_are_scanned_in_linear_time(text: str) -> None:
    """The new layouts and words on 200 KB runs built to make them backtrack: each scan takes
    well under two seconds (the Gate's screening budget is per write)."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS
