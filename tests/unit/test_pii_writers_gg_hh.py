"""PII rules written from writers gg and hh (dev): game and travel vendors' keys, a game
server's login token, passwords named in German, Italian and French, connection URLs with a
password parameter, Central American, Caucasian, Mongolian, Nordic, Andorran and West African
ids, UzCard and Humo cards, the IBANs of the BCEAO and BEAC zones and the Maghreb, account
words that are whole words, phones in fours and dialled with 00, reservation records (PNR
elements); and what is none of these (a Stripe publishable key, a redacted bearer token,
loyalty and air waybill numbers, an ungrouped supply number). Values are made up here."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


_DISCORD = "MTE4NzQ2MjkxMzU1ODIwMjM0NQ.Gx7kPq." + "tR9vWm2LpQ8zXc4NbY6sJd1KfH3gAe5Uo7Ti0"

FOUND = [
    (f"bot token for the tournament bot: {_DISCORD}", "api_key"),
    ("POSTHOG_PERSONAL=phx_" + "Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc3Vb5Nm7Qa9Ws", "api_key"),
    ("obs stream key live_204815531_Hq7Zt2Lm9Xc4Vb8Nk3Rp6Wy1Ds5Fg", "api_key"),
    ("RIOT_KEY=RGAPI-3f9c2a71-8d4e-4b6a-9e0c-5a7d1f2b8c64", "api_key"),
    ("EASYPOST_KEY=EZAK" + "b7c2e9f41d8a3c6e0f5b9d2a7c4e1f8b3d6a9c2e5f0b7d4a1c8e3f", "api_key"),
    ("DUFFEL_TOKEN=duffel_test_Lr8Tq2Zv6Xm1Nc9Bw4Hy7Kd3Pj5Sg0Fa2Ue8Wo6Qi1", "api_key"),
    ("shippo key shippo_test_" + "4c8e1a7f3b9d2e6c0a5f8b1d7e3c9a2f6b4d8e1c", "api_key"),
    ("+sv_setsteamaccount 8E41C07F2A9D35B6E1C8047FA2D93B5E +map de_nuke", "secret_assignment"),
    ('nakama:\\n  socket:\\n    server_key: "pQ7vK2xL9mZ4"', "secret_assignment"),
    ("Das Passwort für den Zugang lautet Kiel#Hafen_58", "secret_assignment"),
    ("la password dell'account PMS è Garda*Lago41", "secret_assignment"),
    ("le mot de passe wifi de la salle est Salle-B-2291", "secret_assignment"),
    ("accès portail : user ops.lyon / mdp Rhone2025!", "secret_assignment"),
    ("jdbc:postgresql://db.internal:5432/crm?user=crm&password=Xr7!pQ2vLm", "url_password"),
    ("NHI KZP0002 on the consent form", "national_id"),
    ("TRN 118-440-207 for the creator's tax form", "national_id"),
    ("DUI 52601815-7, verificado", "national_id"),
    ("DPI/CUI 9083 01669 0305 del jugador", "national_id"),
    ("NIT personal: 4172809-2", "national_id"),
    ("social card 4019283746 for the lease", "national_id"),
    ("personal no. 35001087214 on the card", "national_id"),
    ("identidad 0501-1998-03317 del reclamante", "national_id"),
    ("Регистрийн дугаар: ТА88112305", "national_id"),  # noqa: RUF001 - Cyrillic
    ("fødselsnr 08019516874, crew list", "national_id"),
    ("personnr 7907056530 on the customs form", "national_id"),
    ("kennitala 140196-9249 at check-in", "national_id"),
    ("NRT F-123456-Z on the booking form", "national_id"),
    ("numéro CNI : 2 104 1990 05821", "national_id"),
    ("CNIB B20571834 presented at the gate", "national_id"),
    ("jawaz as-safar raqm XK4018273", "national_id"),
    ("SSR DOCS AF HK1 P/FRA/18KT40921/FRA/02JAN90/M/01JAN32/DUPONT/PAUL", "national_id"),
    ("Uzcard for payouts: 8600312774565101", "payment_card"),
    ("Humo card 9860 1234 5678 9015", "payment_card"),
    ("FP CCCA5425233430109903/1128", "payment_card"),
    ("virement sur MA89011780000012345678901234", "iban"),
    ("IBAN CI93 CI00 8011 1301 1342 9120 0589", "iban"),
    ("Access Bank 0123456789 for the stipend", "bank_account"),
    ("transit 81512, institution 815, folio 1234567 (caisse)", "bank_account"),
    ("Postkonto 80-470003-2 for the deposit", "bank_account"),
    ("1099 contractor (photographer): 512779384, forms by mail", "us_ssn"),
    ("player contact 7014-3382 (WhatsApp)", "phone"),
    ("mob 481 22 905 for the ramp lead", "phone"),
    ("driver's number: 00221 77 512 34 09", "phone"),
    ("SSR CTCM LX HK1/41794128356/CH", "phone"),
    ("SSR CTCE LX HK1/ANNA.MEIER//BLUEWIN.CH", "email"),
    ("complaints from y.tanaka[at]mail.kz about the pass", "email"),
    ("statement goes to r.keller at gmx dot ch", "email"),
]


@pytest.mark.parametrize(("text", "expected"), FOUND)
def test_a_value_of_these_kinds_is_found(text: str, expected: str) -> None:
    """Each new rule finds its kind."""
    assert expected in kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "Stripe('pk_live_" + "51Hx7LmQ2vZ9tKc4Np8Rw3Yb6Gd1Fs5Je0Ua7Ti2Oq9Xe4Wm8Zr3Vb" + "')",
        "PostHog project key phc_" + "Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc3Vb5Nm7Qa9Ws",
        "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.<redacted>.<redacted>",
        "Flying Blue 3532403197 Gold, upgrade on AF 718",
        "AWB 057-93504471 CDG-ABJ 3 pcs",
        "Dial-in code 8812 4471 for the bridge.",
        "PDR 00881200349517 for gas, voltura requested",
        "Pax contact: KANE/MOUSSA MR, seat 12C, transfer DSS-CDG",
        "Access to the Kafka topic was granted on 2026-03-02.",
        "DUI 52601815-3 was the case label in the 2019 file",
        "NHI KZP0003 is not a valid index number",
        "Regional hub ABJ, container MSKU 9070323, HS 8471.30",
        "DOCS folder 2024/118 holds the scanned manifests",
    ],
)
def test_a_look_alike_is_not_reported(text: str) -> None:
    """A publishable key, a public project key, a redacted token, loyalty and waybill numbers,
    a dial-in code, an ungrouped supply number, a word that only begins like an account word,
    numbers whose check digit fails, and reservation-like words without their element."""
    assert kinds(text) == set()


@pytest.mark.parametrize(
    "text",
    [
        "SSR DOCS " + "/" * 200_000,
        "SSR CTCE X HK1/" + "A." * 100_000,
        "jdbc:sqlserver://h" + ";a=b" * 50_000 + ";password",
        "FP CCVI" + "4" * 200_000,
        "x at " + "a dot " * 40_000 + "com",
        "Passwort für " + "das " * 50_000,
        "mob " + "912 34 " * 30_000,
    ],
)
def test_crafted_runs_are_scanned_in_linear_time(text: str) -> None:
    """Long crafted runs through each new pattern finish at once (no backtracking blow-up)."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS
