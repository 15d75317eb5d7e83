"""PII rules written from writers ii to nn (dev).

- ii: wallet recovery phrases and private keys, keys of exchanges and node providers,
  Sumsub and Coinbase developer-platform keys, the Turkish TCKN named as such, a Korean
  bank's account, backup codes written in fours, e-mail addresses written with "arroba",
  passwords named in Ukrainian and in transliterated Arabic.
- jj: health and social-security numbers of Brazil, Mexico, Spain, Germany, Austria and
  Belgium by their names, Dutch, Polish, Italian, Portuguese and German documents by shape,
  state ids in HL7 messages by their identifier type, passwords "changed to" in five
  languages.
- kk: field names written with underscores, Hadoop's s3a keys, South African ids in rows.
- ll (``pii.spoken``): numbers dictated as words in other languages, compounds of text2num's
  six, Polish and Turkish numbers added up, Hindi digits, spelled capitals, dashes,
  hesitations and a check key inside a run, a phone said after a phone word, e-mail
  addresses said with the words for "at" and "dot" of several languages.
- mm (``pii.code``): secrets in source code's idioms.
- nn (``pii.evasion``): digits split by emoji or written with look-alike letters, number
  words mixed with digits, addresses spelled a character at a time, payment apps' banks,
  PINs said with "na".

And what is none of these: wallet addresses, extended public keys, transaction hashes,
company numbers, order and specimen numbers, amounts and dates said as words, references
and placeholders in code, plain numbers, handles. Values are made up here; the base58 keys
and the ids carry valid check digits."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from engram.memory.gate.pii.evasion import mixed_runs
from engram.memory.gate.pii.spoken import spoken_runs_other
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS


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
    # writer ll: numbers dictated in other languages
    ("Cliente: mi teléfono es seis cuatro cero, doce, treinta y cuatro, cincuenta y seis.",
     "phone"),
    (("Caller: meine Handynummer ist null eins sieben eins, zweiundzwanzig, dreiunddreißig, "
     "vierundvierzig."), "phone"),
    (("Caller : mon IBAN, F R soixante-seize, trois zéro zéro zéro, six zéro zéro zéro, zéro un "
     "un deux, trois quatre cinq six, sept huit neuf zéro, un huit neuf."), "iban"),
    ("Müşteri: TCKN bir sıfır sıfır sıfır sıfır sıfır sıfır sıfır bir dört altı.",  # noqa: RUF001
     "national_id"),
    ("Cliente: o CPF é cinco dois nove, nove oito dois, dois quatro sete, traço dois cinco.",
     "national_id"),
    ("Klient: numer telefonu, sześćset cztery, sto dziesięć, osiemset sześćdziesiąt pięć.",
     "phone"),
    (("Cliente: il mio numero di telefono è tre quattro sette, ehm, uno due tre, "
     "quattro cinque sei sette."), "phone"),
    ("Cliente: mi correo es lucia punto fernandez arroba gmail punto com.", "email"),
    ("Klient: mój mail to jan kropka nowak małpa onet kropka pl.", "email"),
    ("Caller: die E-Mail ist lena punkt vogel at gmx punkt de.", "email"),
    # writers mm and nn: code idioms, details written past a filter
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
    "Le total est de quatre-vingt-dix-neuf euros et cinquante centimes, payé le douze mars.",
    "Wir treffen uns um drei, dann gehen wir zu viert oder zu fünft ins Kino.",
    "Son las siete y media y tenemos dos reuniones y tres llamadas pendientes.",
    "una, due, tre, stella: the children counted and ran across the yard",
    "we met at the station and walked to the dot com office",
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
    # the name holds "key" and the value has an exchange key's shape: only "pass" decides
    found = scan("KUCOIN_KEY_PASSPHRASE=Kyiv1054xZtQw7Lm")
    assert [f.kind.value for f in found] == ["secret_assignment"]


def test_a_run_is_read_grouped_and_together() -> None:
    """A number said in groups is given to the scan both ways."""
    runs = list(spoken_runs_other("Cliente: é o dois sete sete, seis dois seis, quatro dois zero"))
    assert [digits for _, _, digits in runs] == ["277 626 420", "277626420"]


def test_a_spelled_letter_is_read_as_the_letter() -> None:
    """ "I come Imola" is an I; the run goes on through it."""
    said = "IBAN I T sessanta, X come Xilofono, zero cinque zero tre quattro, uno due"
    assert [digits for _, _, digits in spoken_runs_other(said)] == [
        "IT60 X 05034 12",
        "IT60X0503412",
    ]


def test_turkish_and_polish_parts_add_up() -> None:
    """A smaller part after a larger one is added; a digit after a digit starts a number."""
    [(_, _, turkish), *_] = spoken_runs_other("sıfır beş yüz elli beş, üç yüz kırk sekiz")  # noqa: RUF001
    assert turkish == "0555 348"
    [(_, _, polish), *_] = spoken_runs_other("dwa trzy, czterysta pięćdziesiąt sześć, siedem osiem")
    assert polish == "23 456 78"


def test_a_plain_number_is_no_disguised_run() -> None:
    """Digits written plainly are the scan's own to read; only disguised runs are read again."""
    assert list(mixed_runs("call 0917 582 3046 or 0917-582-3046")) == []
    assert list(mixed_runs("call 0917 ⭐ 582 ⭐ 3046")) == [(5, 22, "09175823046")]


@pytest.mark.parametrize(
    "text",
    [
        "abandon " * 40_000,  # one recovery-phrase word, repeated
        "binance key=" * 20_000,
        "pk " * 60_000,
        "K" * 200_000,
        "kraken: " + "a" * 200_000,
        "uno dos tres cuatro " * 10_000,
        "un et un et " * 15_000,
        "sıfır beş yüz " * 12_000,  # noqa: RUF001
        "F R " * 40_000,
        "rita ponto carvalho arroba " * 7_000,
        "1 🍑 " * 50_000,
        "O l " * 50_000,
        "k a y " * 30_000 + "@ x . c o m",
        "a " * 60_000 + "!@ x . c o m",
        "one 1 " * 30_000,
    ],
)
def test_crafted_runs_scan_in_linear_time(text: str) -> None:
    """Long runs made to feed the new rules cost no more than linear time."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS


@pytest.mark.parametrize(
    "text",
    [
        "uno dos \ud800 tres cuatro cinco seis siete ocho",  # a lone surrogate inside a run
        "uno dos\x00tres cuatro cinco seis siete ocho",
        "k a y \ud800 @ y a h o o . c o m",
        "pk: \ud800\x00",
        "0917 \ud800 582 \u2b50 3046 call me",
        "abandon " * 11 + "\ud800 abandon",
        "\u20e3\ufe0f" * 1000 + "7\ufe0f\u20e3",
    ],
)
def test_odd_input_in_the_new_readings_is_read_without_error(text: str) -> None:
    """Lone surrogates, NUL and stray keycaps inside the runs the new rules read: the scan
    answers (a detector error would quarantine every such record)."""
    assert isinstance(scan(text), list)
