"""Hostile pass I: the PII rules and the amount readings added on 2026-11-27, read by an
attacker and by a reviewer. Every test here failed when it was written."""

from __future__ import annotations

import time

import pytest

from engram.memory.conflict.quantities import changed_amounts, same_amounts
from engram.memory.conflict.restatement import restates
from engram.memory.gate.pii import PiiKind, scan
from engram.memory.types import MemoryRecord, MemoryType
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS

# --- PII: ordinary text the new rules flagged ------------------------------------------------

#: Text a memory store holds that the rules of regex@3 quarantined: an 18-digit chat or
#: object id read as a NACHA entry because "ach" occurs in "cached", "each" or "reach"; an
#: IPv4 address after a "nas:" field read as a nine-digit national id; a routing number read
#: as a phone number once its text said the account was still missing; a counter or total
#: a few words after "NIC" (a network card), "NID" or "TIN" read as the id those letters
#: abbreviate; two five-digit numbers read as an Indian mobile with no phone word; four-letter
#: capitals after "secret" read as an authenticator seed.
ORDINARY = [
    "Discord message id 632918273055102938 cached for the weekly digest",
    "Reach the release channel 632918273055102938 for each announcement",
    "nas: 10.0.105.221 mounted at /mnt/backup",
    "Routing number 021000021 is the public ABA of the bank; no account number yet",
    "NIC bond0 rx_bytes 123456789012 after the firmware update",
    "NID daemon restarted; uptime 3456789012 ms",
    "TIN roof quote: 12 sheets, total 345678901 rupiah",
    "Zip codes 94105 94107 are in the delivery zone",
    "Q3 units shipped by region: 84210 91377",
    "TOP SECRET: KEEP THIS FILE AWAY FROM INTERNS",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_no_finding(text: str) -> None:
    """Ids, addresses and public bank codes of everyday notes are not quarantined."""
    assert [] == scan(text)


def test_a_nacha_entry_is_still_found() -> None:
    """The entry record of an ACH file keeps its finding when the text names ACH or NACHA."""
    text = "ACH return R03 on entry 622021000021887106293229 0000184250 payroll credit"
    assert PiiKind.BANK_ACCOUNT in {finding.kind for finding in scan(text)}


#: An account number written after its word, in a text that also says something is
#: pending, missing or absent: the phrase "no account number yet" was taken to cover every
#: account word within 24 characters after a "no", "pending", "need" or "missing", and the
#: number after it went unreported.
ACCOUNTS_BESIDE_A_NEGATION = [
    "Direct deposit: no change to account 1234567890, routing 122105155",
    "Pending payroll: account 4455667788, routing 122105155.",
    "Wire still pending to account 4455667788 at Chase, routing 122105155",
    "Need to wire $500 to account 4455667788, routing 122105155 by Friday",
]


@pytest.mark.parametrize("text", ACCOUNTS_BESIDE_A_NEGATION)
def test_an_account_number_after_its_word_is_found_beside_a_negation(text: str) -> None:
    """The account number itself is reported; only a bank code before the word is not."""
    found = [text[f.start : f.end] for f in scan(text) if f.kind is PiiKind.BANK_ACCOUNT]
    assert any(value in {"1234567890", "4455667788"} for value in found), found


# --- PII: time on crafted text ---------------------------------------------------------------

#: Texts of 200,000 characters whose scan grew with the square of their length (3-4 s): one
#: "no account" phrase per account word (each word compared with every phrase), and
#: thousands of checked ids (each digit run compared with every finding before it). Linear,
#: they take about 0.4 s; the bound leaves room for a loaded two-core machine.
CRAFTED = [
    "bank routing 021000021 " + "no account " * 18_200,
    "900-70-1234 " * 16_600,
    "12345-1234567-1 " * 12_500,
]


@pytest.mark.parametrize("text", CRAFTED)
def test_a_crafted_text_of_200_kb_is_scanned_in_linear_time(text: str) -> None:
    """The scan stays linear in the text's length."""
    started = time.perf_counter()
    scan(text[:200_000])
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS


# --- amounts: changed values read as equal ---------------------------------------------------


def _belief(content: str) -> MemoryRecord:
    return MemoryRecord.draft(MemoryType.BELIEF, content, source_agent="agent-i")


#: (stored, proposed): each proposal changes an amount. A milligram dose or a price of a
#: fraction of a cent was compared after rounding to six decimals of its base unit (the
#: kilogram, the dollar), so "2.5 mg" and "2.6 mg" were one key and the NOOP dropped the
#: new dose; a temperature was rounded to whole degrees (a fever of 38.4 °C was 38.2 °C).
CHANGED_SMALL = [
    ("Dana takes 2.5 mg of melatonin at night", "Dana takes 2.6 mg of melatonin at night"),
    ("Dana takes 0.25 mg of melatonin at night", "Dana takes 0.3 mg of melatonin at night"),
    ("The model costs $0.0000025 per token", "The model costs $0.000003 per token"),
    ("Dana's fever was 38.4 °C this morning", "Dana's fever was 38.2 °C this morning"),
    ("The server room is kept at 20.4 °C", "The server room is kept at 20.2 °C"),
]


@pytest.mark.parametrize(("stored", "proposed"), CHANGED_SMALL)
def test_a_small_amount_changed_is_no_restatement(stored: str, proposed: str) -> None:
    """A changed dose or unit price is new information, not the same claim again."""
    assert not restates(_belief(stored), _belief(proposed))


#: (stored, proposed): ten-digit amounts one apart. Rounded to nine significant digits they
#: were the same amount, so the conflict detector zeroed the conflict between them.
CHANGED_LONG = [
    ("The support hotline number is 5550123456", "The support hotline number is 5550123457"),
    ("The export file is 1234567891 bytes", "The export file is 1234567892 bytes"),
]


@pytest.mark.parametrize(("stored", "proposed"), CHANGED_LONG)
def test_a_ten_digit_amount_changed_is_a_changed_amount(stored: str, proposed: str) -> None:
    """Amounts that differ in their tenth digit are not the same amount."""
    assert not same_amounts(stored, proposed)
    assert changed_amounts(stored, proposed)
