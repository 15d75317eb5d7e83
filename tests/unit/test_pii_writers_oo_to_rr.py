"""PII rules written from writers oo to rr (dev).

- oo: codes that open a place or a device's controls, a BitLocker recovery key, a Japanese
  id keyword written without a space after a particle ("アイコのマイナンバー"), the French
  numéro fiscal by its check, a Brazilian account after "agência" and "conta corrente", an
  SSN named further before its digits.
- pp: a Swedish bankgiro, a Singapore bank's account, a Spanish landline written in pairs
  after "llamará al", and a JWT cut short by a logger (not a secret).
- rr: order and waybill numbers named in German, Turkish and Spanish are not phones.
- qq: the Arabic "كلمة السر" for a password, a German identity card after
  "Personalausweisnr.", a German residence card after "eAT-Kartennummer".

Values are made up here; those with a check carry valid check digits."""

from __future__ import annotations

import pytest

from engram.memory.gate.pii import scan


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Garage keypad code is 7741# — only for the dog walker on Tuesdays.", "secret_assignment"),
        ("Asked me to remember the DStv parental-control PIN: 5820.", "secret_assignment"),
        ("Alarm code: 40912, disarm within 30 seconds.", "secret_assignment"),
        ("Door code is 2580 for the side entrance.", "secret_assignment"),
        (
            (
                "BitLocker recovery for NL-LT-0442: "
                "705155-028314-553025-622556-701327-345939-470404-596266"
            ),
            "secret_assignment",
        ),
        ("アイコのマイナンバー 4351-2922-1212\uff08ふるさと納税の申請用\uff09", "national_id"),
        ("Camille's numéro fiscal 13 09 232 804 215 for the CAF application.", "national_id"),
        ("Aluguel: Itaú agência 0734, conta corrente 48291-6, titular Lucas.", "bank_account"),
        ("Betala till bankgiro 7649-6629, OCR på fakturan.", "bank_account"),
        ("DBS account 386-771055-6 under Lim Hui Min, update it in Workday.", "bank_account"),
        ("Transportista: llamará al 912 48 33 07 para confirmar la entrega.", "phone"),
        ("Sam typed his SSN without dashes when we did the credit freeze: 591578338.", "us_ssn"),
        # qq
        ("واي فاي المكتب: الشبكة Hub-Guest، كلمة السر: Amal2024#hub", "secret_assignment"),
        (
            "Personalausweisnr. der Bürgin: N1KN7P2P22, für die Verpflichtungserklärung",
            "national_id",
        ),
        ("eAT-Kartennummer: TK5J0H8VW9, gültig bis 2026.", "national_id"),
    ],
)
def test_found(text: str, expected: str) -> None:
    """Each rule finds its kind in a line like the writers'."""
    assert expected in kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "The project complies with building code 2018 and the fire code.",
        "Gate code B is closed for resurfacing until Friday.",
        "Door code changes every month; ask reception for this month's.",
        # eight groups of six digits, not each a multiple of 11: no recovery key
        "123456-234567-345678-456789-567890-678901-789012-890123",
        (
            "gateway log: Authorization: Bearer "
            "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOi\u2026 (truncated by the logger)"
        ),
        "numéro fiscal 1309232804216 (une faute de frappe, la clé ne correspond pas)",
        "Pedido 912 48 33 07 entregado en Madrid.",
        # rr: an order or a waybill is no phone, in other languages too
        "Hepsiburada sipariş 4102938475, fatura kesilecek",
        "Servientrega guía 2045678901 en reparto, llega hoy",
        "Kaufland Bestellnummer 0176-4412-9983 (Marktplatz-ID)",
    ],
)
def test_not_found(text: str) -> None:
    """Near misses of each rule stay unflagged."""
    assert set() == kinds(text)
