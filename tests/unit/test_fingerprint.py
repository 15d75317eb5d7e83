"""Normalised content hashes and significant tokens (engram.memory.fingerprint)."""

from __future__ import annotations

from engram.memory.fingerprint import content_hash, normalise, significant_tokens


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
