"""PII rules written from writers ii, jj and kk (dev). From ii: wallet recovery phrases and
private keys, keys of exchanges and node providers, Sumsub and Coinbase developer-platform
keys, the Turkish TCKN named as such, a Korean bank's account, backup codes written in fours,
e-mail addresses written with "arroba", passwords named in Ukrainian and in transliterated
Arabic. From jj: health and social-security numbers of Brazil, Mexico, Spain, Germany,
Austria and Belgium by their names, Dutch, Polish, Italian, Portuguese and German documents
by shape, state ids in HL7 messages by their identifier type, passwords "changed to" in five
languages. And what is none of these: wallet addresses, extended public keys, transaction
hashes, a company's TIN, VAT number and RUT, a withdrawal id, prose made of common words, a
hospital's own numbers in HL7, order and specimen numbers. Values are made up here; the
base58 keys and the ids carry valid check digits."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


_WIF = "KwTNw9KK6VLzRqrGpNQWgnWu9XvjqonRyBpnK6KhngNent3Etwrv"
_XPRV = (
    "xprv9s2SVEMYiq7tnN1x3NJXMMeq6apWiDtCmAfVn7xoaxvVgm1MM6dUNtRLEWx7eEj9jdAAZs5bHXKqBmVucg"
    "Ai4XG1RGnT9QHxrhCG6dh6YwX"
)
_ENGLISH = "cram often ask hockey inform broken trophy guide diamond vehicle source lobster"
_PORTUGUESE = (
    "envolver sediado artigo pioneiro valores capricho juba fragata fartura caule saudade riacho"
)

FOUND = [
    (f"restore words for the hot wallet: {_ENGLISH}", "secret_assignment"),
    (f"minha frase de recuperação: {_PORTUGUESE}", "secret_assignment"),
    # accents left off, as people type them, and written decomposed (a letter + U+0301)
    ("semilla: pedir langosta satan rendir bonito huerta situar juicio debil caiman ombligo gastar",
     "secret_assignment"),
    (("semilla: pedir langosta sata\u0301n rendir bonito huerta situar juicio de\u0301bil "
      "caima\u0301n ombligo gastar"), "secret_assignment"),
    (f"bitcoin-cli importprivkey {_WIF} sweep false", "secret_assignment"),
    (f"paper wallet {_WIF}", "secret_assignment"),
    (f"HD root: {_XPRV}", "secret_assignment"),
    ('{"signer":"0xAbC","pk":"4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b"}',
     "secret_assignment"),
    ("BINANCE_API_SECRET=Qx7pL2mZ9vR4tY8wK3nB6cF1hJ5sD0gA2eU7iO9kP4lM8qW3zX6vC1bN5mT0yR2",
     "api_key"),
    ('kraken: { api_key: "Zq8Lm3Xc7Vb2Nk9Pw4Ty6Rs1Hd5Fg0Ja8Ue3Io" }', "api_key"),
    ("gateio: key 5e2f9a7c1b8d3e6f0a4c9b2d7e1f5a8c / secret 9b3e7a1f", "api_key"),
    ("RPC=https://eth-mainnet.g.alchemy.com/v2/Kp7Zx2Qm9Lw4Vn8Rt3Yc6Hb1", "api_key"),
    ("node: https://mainnet.infura.io/v3/3f8a2c7e91d4b6f05a2e8c7d1b9f4a6e", "api_key"),
    ("SUMSUB_APP_TOKEN=sbx:Hq7Zt2Lm9Xc4Vb8Nk3Rp6Wy1.Ds5Fg0Ja8Ue3Io7Kp2Zx9Qm4Lw8Vn3Rt", "api_key"),
    (('"name": "organizations/3f8a2c7e-91d4-4b6f-a05a-2e8c7d1b9f4a/apiKeys/'
      '7c1e5b9a-2d4f-4e8a-b6c3-0f9d2a7e5b1c"'), "api_key"),
    ("KYC | TCKN 10000000146 | NVI match", "national_id"),
    ("우리은행 1002-345-678901 예금주 박서연", "bank_account"),
    ("backup codes: 4821 7730  1956 0042  6618 2395", "secret_assignment"),
    ("correo: ana.ruiz [arroba] example [punto] org", "email"),
    ("пароль від кабінету: Dn!pro_2291x", "secret_assignment"),
    ("kalimat as-sir dyal l'wifi hiya: Rabat#Mdina77", "secret_assignment"),
    ("Cartão Nacional de Saúde (CNS): 700 1234 5678 9010", "national_id"),
    ("Número de Seguridad Social (IMSS): 42098765433", "national_id"),
    ("Nº afiliación a la Seguridad Social: 28/12345678/40", "national_id"),
    ("Versichertennummer (eGK): K123456781, Kostenträger AOK", "national_id"),
    ("SVNR 1231150385 - e-card gesteckt", "national_id"),
    ("NISS/INSZ 85120112367 - mutualité", "national_id"),
    ("Paspoortnummer XR4K82PL7 gecontroleerd", "national_id"),
    ("Seria i numer dowodu osobistego: ABC123456", "national_id"),
    ("Nº de utente SNS: 912 345 678", "national_id"),
    ("PID|1||123456782^^^NLMINBIZA^NNNLD~44120^^^UMCU^PI||Jansen^Eva", "national_id"),
    ("het wachtwoord voor de testomgeving is nu Lente2025!Ams", "secret_assignment"),
    ("hasło do konta serwisowego zmienione na Krakow#Wawel77", "secret_assignment"),
    ("senha do banco de homologação trocada para Rio#Hml2025", "secret_assignment"),
    # writer kk: field names written with underscores, Hadoop's s3a keys, ZA ids in rows
    ('{"name":"A. Rao","passport_no":"R7085347","nationality":"IND"}', "national_id"),
    ('{"aadhaar_no":"234567890124","mobile":"+91-9435552477"}', "national_id"),
    ("UPDATE payouts SET routing_number = '110000000', account_number = '0591020934'",
     "bank_account"),
    ("spark.hadoop.fs.s3a.secret.key=ncjcDe//vX5O2nZwu9GKG6xFNMvai/Pk9W/dUQ5l",
     "aws_secret_access_key"),
    ("ZA|Thabo Mokoena|8001015009087|Johannesburg", "national_id"),
]  # fmt: skip

NOT_FOUND = [
    "withdrawal to bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq confirmed",
    "deposit address 0x71C7656EC7ab88b098defB751B7401B5f6d8976F on BSC",
    (
        "watch-only: xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1R"
        "upje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"
    ),
    "tx 9f2c4e6a8b0d1f3e5a7c9b2d4f6e8a0c1b3d5f7e9a2c4e6b8d0f1a3c5e7b9d2f4 settled",
    "the team agreed to move the oracle update after the audit and before the launch window",
    (
        "word list for the game: apple, banana, cherry, dragon, eagle, fabric, garden, hammer, "
        "island, jacket, kitten, ladder, magnet"
    ),
    "NG corporate client: RC 7386613, company TIN 88912839-0001, CAC certificate uploaded",
    "Company: Example Digital (Pty) Ltd, VAT 4753076788",
    "USDT payout, wid 3525363950, fee 1 USDT",
    "row pk 17, checksum sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "see the binance api key documentation_overview_pages first",
    "RUT empresa 76.086.428-5 (Laboratorio SpA), factura N° 88123",
    "PID|1||7012345^^^UMCU^PI||de Vries^Sanne||19890214|F",
    "OBR|1|ORD448907|LAB773390|24331-1^Lipid panel^LN|||20240314073000|||||||2403140188|SER",
    "Próbka 2403130981 (EDTA) przyjęta 08:14",
    "Nachforderung Auftrag 7704215589 an Station 9A",
    '{"id":771,"email_token":"vault:v1:+dl/rzCgdjH1np9T/yYq66dgKE89Uiq5jpAWEfyVaO7L=","op":"u"}',
    "barcode 8001015009087 on the pallet label",
]


@pytest.mark.parametrize(("text", "kind"), FOUND)
def test_found(text: str, kind: str) -> None:
    """Each line of FOUND is reported with its kind."""
    assert kind in kinds(text)


@pytest.mark.parametrize("text", NOT_FOUND)
def test_not_found(text: str) -> None:
    """Public values and company numbers are not reported."""
    assert kinds(text) == set()


def test_a_wif_with_a_broken_checksum_is_not_a_key() -> None:
    """A base58 string of a WIF key's shape is a key only when its checksum holds."""
    broken = _WIF[:-1] + ("v" if _WIF[-1] != "v" else "w")
    assert kinds(f"paper wallet {broken}") == set()


def test_a_passphrase_beside_an_exchange_key_stays_a_secret() -> None:
    """An exchange's passphrase is a password, not the exchange's key."""
    found = scan("KUCOIN_PASSPHRASE=Kyiv$1054x-Zt")
    assert [f.kind.value for f in found] == ["secret_assignment"]


@pytest.mark.parametrize(
    "text",
    [
        "abandon " * 40_000,  # one recovery-phrase word, repeated
        "binance key=" * 20_000,
        "pk " * 60_000,
        "K" * 200_000,
        "kraken: " + "a" * 200_000,
    ],
)
def test_crafted_runs_scan_in_linear_time(text: str) -> None:
    """Long runs made to feed the new rules cost no more than linear time."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < 2.0
