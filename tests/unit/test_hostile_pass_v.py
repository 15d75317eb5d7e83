"""Hostile pass V: PII screening of text written with combining marks (pure logic, no mocks).

The screen reads non-ASCII text folded one character at a time (NFKC of each character).
A letter written decomposed, as macOS, some keyboards and some copy-paste paths write it
("e" + U+0301 for "é", Hangul as separate jamo, "ド" as "ト" + U+3099), was never composed,
so the keywords and the e-mail pattern, written composed, did not match it; and a mark put
on a digit or an ASCII letter (underlined or struck-through "fancy text", an accent on
every digit) split a value that every reader still reads whole.
"""

from __future__ import annotations

import unicodedata

import pytest

from engram.memory.gate.pii import MAX_SPOKEN_RUNS, scan
from engram.memory.gate.pii.findings import PiiKind

# Found in their composed form; each must be found decomposed (NFD) as well.
COMPOSED = (
    ("Write to rené@example.fr about the lease.", PiiKind.EMAIL),
    ("Contraseña: Zx9#kLp2qRt", PiiKind.SECRET_ASSIGNMENT),
    ("El número de teléfono es 612 48 33 07", PiiKind.PHONE),
    ("Mon numéro fiscal est 30 23 217 600 053", PiiKind.NATIONAL_ID),
    ("パスワード: Zx9#kLp2qRt", PiiKind.SECRET_ASSIGNMENT),
    ("비밀번호: Zx9#kLp2qRt", PiiKind.SECRET_ASSIGNMENT),
    ("Führerschein-Nr. B072RRE2I55", PiiKind.NATIONAL_ID),
)
# A mark on every digit or letter of a value: it still reads as the value.
MARKED = (
    ("card 4111 1111 1111 1111", PiiKind.PAYMENT_CARD),
    ("SSN 536-22-8317", PiiKind.US_SSN),
    ("The garage keypad code is 7741#.", PiiKind.SECRET_ASSIGNMENT),
    ("Recovery key 449086-275869-581053-145453-004422-697873-223652-314270", None),
    ("Page the lead at jana.novak@example.com", PiiKind.EMAIL),
)
# Marks a writer of Arabic or Hebrew adds or leaves out without changing the word.
VOWELLED = (
    "كَلِمَة السِّر: Zx9#kLp2qR",
    "كَلِمَةُ المُرُورِ: Zx9#kLp2qR",
    "كلمـــة الســر: Zx9#kLp2qR",
    "סִיסְמָה: Zx9#kLp2qR",
)


def _kinds(text: str) -> set[PiiKind]:
    return {f.kind for f in scan(text)}


def _decorates(char: str, mark: str) -> bool:
    """``mark`` on ``char`` (an ASCII letter or digit) leaves it the same character."""
    return char.isascii() and char.isalnum() and len(unicodedata.normalize("NFC", char + mark)) == 2


@pytest.mark.parametrize(("text", "kind"), COMPOSED)
def test_pii_written_decomposed_is_found_as_written_composed(text: str, kind: PiiKind) -> None:
    """Text in NFD is screened as its NFC form is, and the span covers the marks."""
    assert kind in _kinds(unicodedata.normalize("NFC", text))
    decomposed = unicodedata.normalize("NFD", text)
    assert kind in _kinds(decomposed)
    assert all(
        unicodedata.category(decomposed[f.end : f.end + 1] or " ")[0] != "M"
        for f in scan(decomposed)
    )


@pytest.mark.parametrize("mark", ["\u0301", "\u0332", "\u0336", "\u0338", "\u20dd"])
@pytest.mark.parametrize(("text", "kind"), MARKED)
def test_a_mark_on_each_character_does_not_hide_a_value(
    text: str, kind: PiiKind | None, mark: str
) -> None:
    """An accent, an underline, a strike-through or an enclosing circle on each ASCII digit,
    and on each ASCII letter it does not make another letter of ("e" and an acute are "é"),
    is read past: the value is found, with its span in the marked text."""
    expected = kind or PiiKind.SECRET_ASSIGNMENT
    marked = "".join(c + mark if _decorates(c, mark) else c for c in text)
    found = scan(marked)
    assert expected in {f.kind for f in found}
    plain = {f.kind: marked[f.start : f.end].replace(mark, "") for f in found}
    assert {f.kind: text[f.start : f.end] for f in scan(text)}[expected] == plain[expected]


@pytest.mark.parametrize("text", VOWELLED)
def test_a_password_named_with_vowel_points_or_a_stretched_word_is_found(text: str) -> None:
    """Arabic harakat, its tatweel and Hebrew points do not hide the word for a password."""
    assert PiiKind.SECRET_ASSIGNMENT in _kinds(text)


@pytest.mark.parametrize(
    "text",
    [
        "The café on the corner opens at nine; José makes the espresso.",
        "Gärtnerei Müller liefert die Rosen am Dienstag.",
        "The team met in Zürich and Kraków for the résumé review.",
        "ありがとうございます。会議は三時からです。",
        "회의는 세 시에 시작합니다.",
        "मैं कल दिल्ली जाऊँगा।",
        "ภาษาไทยสวยงาม",
        "سأذهب إلى السوق غدًا",
    ],
)
def test_clean_text_written_decomposed_stays_clean(text: str) -> None:
    """Prose with accents, kana, Hangul, Devanagari, Thai and Arabic marks, composed or
    decomposed, holds no finding."""
    assert [] == scan(unicodedata.normalize("NFC", text))
    assert [] == scan(unicodedata.normalize("NFD", text))


# --------------------------------------------------------------------------- spoken runs

#: Numbers said or disguised, each found on its own.
SAID = (
    ("My social is five three six, two two, eight three one seven.", PiiKind.US_SSN),
    ("Mi teléfono es seis uno dos, cuatro ocho, tres tres, cero siete.", PiiKind.PHONE),
    ("My card is 4111 one 111 one 111 one 111.", PiiKind.PAYMENT_CARD),
    ("ssn 5😀3😀6😀2😀2😀8😀3😀1😀7", PiiKind.US_SSN),
)
#: Runs of counted numbers that hold nothing, in English and in Spanish.
DECOYS = (
    "We counted one two three four five six seven apples. ",
    "uno dos tres cuatro cinco seis siete, dijo. ",
)


@pytest.mark.parametrize("decoy", DECOYS)
@pytest.mark.parametrize(("said", "kind"), SAID)
def test_a_said_number_after_many_other_runs_is_not_left_unread(
    said: str, kind: PiiKind, decoy: str
) -> None:
    """The scan read at most eight runs of spoken or disguised digits and skipped the rest:
    nine counted runs before a spoken SSN, a phone said in Spanish, a card written half in
    words or an SSN split by emoji hid it. It now reads ``MAX_SPOKEN_RUNS`` (32) and reports
    the next run unread (as a phone, the fail-safe side), as a digit run past the phone
    matcher's limit is."""
    assert kind in _kinds(said)
    assert set() == _kinds(decoy * MAX_SPOKEN_RUNS)
    assert kind in _kinds(decoy * 9 + said)
    assert kind in _kinds(decoy * (MAX_SPOKEN_RUNS - 1) + said)
    assert _kinds(decoy * (MAX_SPOKEN_RUNS + 1) + said)


# --------------------------------------------------------------------------- JWT cut short

HEADER = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
PAYLOAD = "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
SIGNATURE = "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"


@pytest.mark.parametrize("ellipsis", ["...", "\N{HORIZONTAL ELLIPSIS}", "...."])
def test_a_whole_jwt_with_an_ellipsis_for_its_last_dot_is_a_jwt(ellipsis: str) -> None:
    """regex@6 took an ellipsis after a token's payload for the place its signature was cut
    off and reported nothing, even when the whole signature followed the ellipsis: a live
    token written ``header.payload...signature`` (a reader restores the dot) was stored
    unquarantined. A token is cut short only when no signature-long run follows the dots."""
    assert {PiiKind.JWT} == _kinds(f"the log line shows {HEADER}.{PAYLOAD}{ellipsis}{SIGNATURE}")
    assert set() == _kinds(f"the log line shows {HEADER}.{PAYLOAD}{ellipsis}")
    assert set() == _kinds(f"the log line shows {HEADER}.eyJzdWIiOi{ellipsis} (cut in the log)")
    assert set() == _kinds(f"the log line shows {HEADER}.{PAYLOAD}{ellipsis}Qssw5c")


# --------------------------------------------------------------------------- order labels


@pytest.mark.parametrize(
    "text",
    [
        "Contacto del guía: +34 612 48 33 07",
        "Teléfono del guía: 612 48 33 07",
        "Handynummer der Bestellung: +49 151 23456789",
        "Le téléphone du service commande : 06 12 34 56 78",
    ],
)
def test_a_phone_after_a_guide_or_an_order_named_as_a_phone_is_a_phone(text: str) -> None:
    """regex@6 added the Spanish word for a waybill (``guía``, also a tour guide) and the
    words for an order in six languages to the labels after which digits are no phone: the
    guide's phone, written with ``+34`` or after ``Teléfono del``, was no longer found. No
    label now excludes a number written with ``+`` and a country code, and those labels
    exclude none whose clause names a phone before them."""
    assert {PiiKind.PHONE} == _kinds(text)


@pytest.mark.parametrize(
    "text",
    ["Número de guía: 7741 2290 1134", "Pedido 4155550132 enviado", "Bestellnummer 030 1234567"],
)
def test_a_waybill_or_an_order_number_is_still_no_phone(text: str) -> None:
    """Digits after a waybill or an order named without a phone word stay no phone."""
    assert set() == _kinds(text)
