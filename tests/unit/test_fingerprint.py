"""Normalised content hashes and significant tokens (engram.memory.fingerprint)."""

from __future__ import annotations

from engram.memory.fingerprint import (
    content_hash,
    normalise,
    significant_tokens,
    significant_words,
)


def test_fingerprints_ignore_case_spacing_and_final_punctuation() -> None:
    """Normalisation makes trivial variants equal, and only those."""
    assert normalise("The  Ledger\tis UP!") == normalise("the ledger is up")
    assert content_hash("A b.") == content_hash("a   B")
    assert content_hash("a b") != content_hash("a c")
    assert 32 == len(content_hash("x"))


def test_significant_tokens_keep_values_and_drop_plural_endings() -> None:
    """Versions and numbers stay distinct; articles and plural endings do not matter."""
    assert significant_tokens("The deploy target is v2.0") != significant_tokens(
        "The deploy target is v2.1"
    )
    assert significant_tokens("restored from backups") == significant_tokens(
        "restored from the backup"
    )


def test_significant_words_keep_their_order() -> None:
    """Two swapped words leave the set of words equal but not the sequence (hostile pass G:
    "Alice reports to Bob" was a near duplicate of "Bob reports to Alice")."""
    swapped = ("Alice reports to Bob", "Bob reports to Alice")
    assert significant_tokens(swapped[0]) == significant_tokens(swapped[1])
    assert significant_words(swapped[0]) != significant_words(swapped[1])
    assert significant_words("The backups were restored") == significant_words(
        "the backup was restored"
    )
    assert significant_words("sent to Acme") != significant_words("sent by Acme")
