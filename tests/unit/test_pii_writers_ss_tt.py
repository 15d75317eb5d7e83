"""PII rules written from writers ss and tt (dev).

- ss (a veterinary group and a pet insurer): the Belgian national number after "numéro
  national" and "Rijksreg. nr.", Luxembourg's matricule by its two check digits after
  "sécurité sociale" or "Luxembourg", a JMBG by its keyword and an EMŠO after a bare "ID",
  Slovene and Croatian identity cards, an Icelandic phone after "síma"; a company's VAT
  number is not a phone, and a pet's or a horse's passport names no person.
- tt (a ship manager's crew agency): seafarers' documents (seaman's book, SIRB, CDC, INDoS,
  Buku Pelaut), Philippine SSS, PhilHealth and Pag-IBIG numbers, a Myanmar NRC by its
  layout, a Moldovan IDNP, a Russian account after "счёт" or "r/s" in Cyrillic (the bank's
  БИК is no phone), an Indonesian account after "no rek", an IBAN whose BBAN is letters, a
  PuTTY key file, a user's password given as a pair or named in capitals; a form's stand-in
  numbers (all zeros, digits counted up) are no document's.

Values are made up here; those with a check carry valid check digits."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


PUTTY = (
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deck-laptop\n"
    "Public-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIOr7\nPrivate-Lines: 1\n"
    "AAAAIFq2Rk9Xw8mT4pLc7vY1nB0sZe3HdJgUaQ6o\nPrivate-MAC: 9f1c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ss
        ("Numéro national de la cliente : 58011214244, pour la domiciliation.", "national_id"),
        ("Aanvraagformulier — Rijksreg. nr. 96.04.12-543.74; hond: Fientje", "national_id"),
        ("Assurance maladie (LU), sécurité sociale 1952100467839, chat Mimi", "national_id"),
        ("Owner ID (Luxembourg) 1970072750706 for the boarding contract", "national_id"),
        ("JMBG vlasnice psa (rođena u Nikšiću): 0202956264911", "national_id"),
        ("Pet insurance proposal, policyholder ID 2810992505256, two cats", "national_id"),
        ("Osebna izkaznica št. IB2279164, lastnica mačke", "national_id"),
        ("Osobna iskaznica br. 207731548 (vlasnik konja)", "national_id"),
        ("Hann hringdi úr síma 771 3308 vegna hundsins.", "phone"),
        # tt
        ("SEAMAN'S BOOK NO. C4417302 - AB REYES, RENEWED AT MARINA", "national_id"),
        ("SIRB no. D2089913 to be presented at the Manila airport", "national_id"),
        ("CDC No. KOL 304418, Wiper Das, joining at Fujairah", "national_id"),
        ("INDoS No. 11NL2093 - Cadet Iyer", "national_id"),
        ("Buku Pelaut no. G 318806 a.n. Kelasi Wibowo", "national_id"),
        ("SSS NO. 33-4182907-5 FOR THE LOAN APPLICATION", "national_id"),
        ("Bosun Reyes - SSS 02-5518204-1 - contribution", "national_id"),
        ("PhilHealth no. 19-250448812-7 for the dependants", "national_id"),
        ("NRC 9/MaHaMa(N)204117 - OS Min Thu", "national_id"),
        ("IDNP 2002449781508 - Motorist Ceban", "national_id"),
        ("Зарплата: счёт 40817810653626033567, БИК 045134212, Сбербанк", "bank_account"),
        ("Реквизиты: р/с 40817810491207754118, банк ВТБ", "bank_account"),  # noqa: RUF001
        ("Gaji ke BNI no rek 0418-2291-73 a/n Wibowo", "bank_account"),
        ("Wages to MD42 MPJ8 KZWB 8UVE UPWC BO7K (Ceban)", "iban"),
        (PUTTY, "private_key"),
        ("Bridge PC: user master / pass KdwRmtuyPLez", "secret_assignment"),
        ("CREW PORTAL PW FOR 3/E LIM: Rq8#tvX2mk (TEMP)", "secret_assignment"),
    ],
)
def test_found(text: str, expected: str) -> None:
    """Each rule finds its kind in a line like the writers'."""
    assert expected in kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "EU pet passport no. BE-2207719, issued at the Ghent clinic.",
        "Horse passport UELN 528004103318877 - Dutch warmblood mare",
        "Practice VAT: BE 0417.552.309 (company, on every invoice)",
        "Example on the form: passport P0000000A, seaman's book C0000000",
        "PhilHealth number format is 12-345678901-2; bring the MDR",
        "Bank code only: БИК 044525225 (the bank's, for the transfer form)",
        "Bridge PC: user master / pass changeme",
        "Login for the portal is user master, password to follow by phone",
        # ordinary notes a review of regex@8 found flagged (hyphenated words read as a
        # password word and its value; a status named "for" something; a ticket's number)
        "login form / password-reset-flow is broken on Safari",
        "users, pass-through mode enabled on eth0",
        "User model / password-hashing uses argon2id since v3",
        "user flow; pass-by-reference semantics in the SDK",
        "PASS FOR RELEASE 2.4: all-tests-green",
        "PW FOR TEAM: ASK-IN-SLACK",
        "ticket 1/abcdef(N)123456 closed",
        "order id 12/Yangon(N)123456 shipped",
        "cdc no 123456 for the orders pipeline",
    ],
)
def test_not_found(text: str) -> None:
    """Hard negatives of the same writers stay clean."""
    assert kinds(text) == set()


@pytest.mark.parametrize(
    "text",
    [
        "user " + "a" * 200_000,
        "user a / pass " + "b" * 200_000,
        "login x, " * 20_000,
        "pw for " + "c " * 100_000 + ":",
        "PuTTY-User-Key-File-3: " + "Private-Lines: 1 " * 12_000,
        "PuTTY-User-Key-File-3: Private-Lines: 1 " + "A" * 30 + " x" * 100_000,
        "seaman's book no. " * 10_000,
        "NRC 12/" + "Da" * 100_000,
        # runs of blanks between a rule's words (a review of regex@8: 16,000 characters
        # took 17.6 s before each gap was bounded)
        "pass for " + " " * 20_000 + " for",
        "user" + " " * 20_000 + "x pass",
    ],
)
def test_crafted_runs_are_scanned_in_linear_time(text: str) -> None:
    """The new rules on 200 KB runs built to make them backtrack: each scan takes well
    under the crafted-text limit (the Gate's screening budget is per write)."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS
