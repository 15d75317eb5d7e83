"""Numbers dictated as words in other languages (``pii.spoken``, from writer ll): compounds of
text2num's six languages, Polish and Turkish numbers added up, Hindi digits, spelled capitals,
dashes, hesitations and a check key's name inside a run, a phone said after a phone word, and
e-mail addresses said with the words for "at" and "dot" of several languages; what is none
of these (amounts, dates and public prose with number words). Values are made up here."""

from __future__ import annotations

import time

import pytest

from engram.memory.gate.pii import scan
from engram.memory.gate.pii.spoken import spoken_runs_other


def kinds(text: str) -> set[str]:
    """The kinds the scanner reports for ``text``."""
    return {finding.kind.value for finding in scan(text)}


FOUND = [
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
]  # fmt: skip

NOT_FOUND = [
    "Le total est de quatre-vingt-dix-neuf euros et cinquante centimes, payé le douze mars.",
    "Wir treffen uns um drei, dann gehen wir zu viert oder zu fünft ins Kino.",
    "Son las siete y media y tenemos dos reuniones y tres llamadas pendientes.",
    "una, due, tre, stella: the children counted and ran across the yard",
    "we met at the station and walked to the dot com office",
]


@pytest.mark.parametrize(("text", "kind"), FOUND)
def test_found(text: str, kind: str) -> None:
    """Each dictated value is reported with its kind."""
    assert kind in kinds(text)


@pytest.mark.parametrize("text", NOT_FOUND)
def test_not_found(text: str) -> None:
    """Number words in ordinary sentences are no identifier."""
    assert kinds(text) == set()


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


@pytest.mark.parametrize(
    "text",
    [
        "uno dos tres cuatro " * 10_000,
        "un et un et " * 15_000,
        "sıfır beş yüz " * 12_000,  # noqa: RUF001
        "F R " * 40_000,
        "rita ponto carvalho arroba " * 7_000,
    ],
)
def test_crafted_runs_scan_in_linear_time(text: str) -> None:
    """Long runs of number words cost no more than linear time."""
    started = time.perf_counter()
    scan(text)
    assert time.perf_counter() - started < 2.0
