"""Hostile pass V: the PII screen's newest rules and consolidation's topic planner, attacked
with crafted text (decomposed letters, marks, scripts, sizes) and killed passes.

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_v_held.py`` (and the screen's pure cases in
``tests/unit/test_hostile_pass_v.py``). Real embedded PostgreSQL, the real embedding model,
no mocks.
"""

from __future__ import annotations

import unicodedata

from engram.memory.types import TrustLevel
from tests.integration.twin_helpers import Store, twin_a  # noqa: F401 - the fixture

#: PII as a reader reads it, written so that the screen read past it: decomposed letters
#: (macOS and some keyboards write NFD), underlined digits ("fancy text" generators).
DISGUISED = (
    unicodedata.normalize("NFD", "The landlord reads mail at rené@example.fr on Fridays."),
    unicodedata.normalize("NFD", "La contraseña del portal: Zx9#kLp2qRt"),
    "The corporate card is " + "".join(c + "\u0332" for c in "4111111111111111") + ".",
    "The door code is " + "".join(c + "\u0336" for c in "4821") + " for the storage room.",
)


async def test_pii_written_decomposed_or_with_marks_is_quarantined_on_every_adapter(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """High. The screen folded non-ASCII text one character at a time, so a letter written
    decomposed ("e" + U+0301, as macOS writes it) was never composed and a mark on a digit
    (an underline, a strike-through) stayed between the digits: an address with an accented
    local part, a password named in Spanish, a card with underlined digits and a struck-
    through door code were stored at ``agent`` through REST and MCP, readable by every
    agent, while the same text composed or unmarked was quarantined. Decomposed letters are
    now composed and marks no letter takes are read past; each is stored ``sensitive``."""
    await twin_a.agent("writer", TrustLevel.STANDARD)
    writer = twin_a.principals["writer"]
    for content in DISGUISED:
        made = await twin_a.client.post(
            "/v1/memories",
            json={"type": "belief", "content": content},
            headers=twin_a.headers["writer"],
        )
        assert 201 == made.status_code, made.text
        assert "sensitive" == made.json()["record"]["access_level"], content
        assert "quarantined" in made.json()["reason"], made.json()["reason"]
        told = await twin_a.tools.call(
            "remember", {"type": "belief", "content": content + " Still so."}, writer
        )
        assert not told.is_error, told.structured_content
        record = (told.structured_content or {})["record"]
        assert "sensitive" == record["access_level"], content


async def test_a_said_ssn_behind_nine_counted_runs_is_quarantined(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """High. The screen read at most eight runs of spoken or disguised digits per text and
    skipped the rest without a word (unlike digit runs past the phone matcher's limit, which
    it reports unread): nine runs of counted number words before a spoken SSN, or before a
    card number written half in words, and the record was stored at ``agent`` for every
    reader. It now reads 32 runs and reports the next one unread: both records are
    quarantined, and 33 counted runs alone are too (fail-safe), eight alone are not."""
    writer = await twin_a.agent("writer", TrustLevel.STANDARD)
    counted = "The inventory clerk counted one two three four five six seven crates. " * 9
    for said in (
        "The new hire's social is five three six, two two, eight three one seven.",
        "The corporate card is 4111 one 111 one 111 one 111.",
    ):
        told = await twin_a.tools.call(
            "remember", {"type": "belief", "content": counted + said}, writer
        )
        assert not told.is_error, told.structured_content
        assert "sensitive" == (told.structured_content or {})["record"]["access_level"], said
    one = counted[: len(counted) // 9]
    for runs, level in ((8, "agent"), (33, "sensitive")):
        told = await twin_a.tools.call(
            "remember", {"type": "belief", "content": one * runs}, writer
        )
        assert not told.is_error, told.structured_content
        assert level == (told.structured_content or {})["record"]["access_level"], runs
