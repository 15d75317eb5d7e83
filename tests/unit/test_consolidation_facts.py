"""Fact extraction: facts, entities, clauses and content words of consolidation."""

from __future__ import annotations

import pytest

from engram.memory.consolidation.facts import (
    Fact,
    clauses,
    content_words,
    entities,
    fact_keys,
    facts,
    lost_facts,
    normalise,
)


def kinds(text: str) -> dict[str, str]:
    """The facts of ``text`` as a mapping from their text to their kind."""
    return {fact.text: fact.kind for fact in facts(text)}


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        (
            "Docs live at https://example.com/docs/a.html today.",
            "https://example.com/docs/a.html",
            "url",
        ),
        ("Edit /etc/nginx/nginx.conf first.", "/etc/nginx/nginx.conf", "path"),
        ("We changed config.yaml again.", "config.yaml", "path"),
        ("Deployed v2.4.1 to staging.", "v2.4.1", "version"),
        ("The bill came to $1,200 in total.", "$1,200", "money"),
        ("It cost 30 USD in the end.", "30 USD", "money"),
        ("Released on 2024-03-05 as planned.", "2024-03-05", "date"),
        ("It was March 5th, 2024 when it broke.", "March 5th, 2024", "date"),
        ("The job ran at 14:30 every day.", "14:30", "time"),
        ("Restart db-prod-2 now.", "db-prod-2", "ident"),
        ("Ticket INC-4411 is open.", "INC-4411", "ident"),
        ("The client saw ERR_CONN_RESET twice.", "ERR_CONN_RESET", "ident"),
        ("Usage reached 12% overnight.", "12%", "number"),
        ("The volume holds 3 GB of data.", "3 GB", "number"),
        ("We paged Bob Smith about it.", "Bob Smith", "name"),
    ],
)
def test_facts_finds_each_kind(text: str, value: str, kind: str) -> None:
    """Each kind of fact is found with its text as written and its kind."""
    assert kind == kinds(text).get(value)


def test_facts_are_in_order_of_appearance() -> None:
    """facts() returns the facts in the order they appear in the text."""
    text = "Deployed v2.4.1 to db-prod-2 at 14:30 on 2024-03-05 for $1,200."
    assert ["v2.4.1", "db-prod-2", "14:30", "2024-03-05", "$1,200"] == [f.text for f in facts(text)]


def test_trailing_punctuation_is_not_part_of_a_fact() -> None:
    """A fact ending a sentence or clause does not carry the punctuation that follows it."""
    assert {"db-prod-2", "v1.2"} <= {f.text for f in facts("Failed on db-prod-2, then on v1.2.")}


def test_lone_digit_is_not_a_fact() -> None:
    """A single digit ("3 of 5") is not a fact, but a longer number is."""
    assert [] == [f for f in facts("it took 3 of 5 tries") if f.kind == "number"]
    assert "42" in fact_keys("it took 42 tries")


def test_capital_that_opens_a_sentence_is_not_a_name() -> None:
    """A capitalised word that only opens a sentence is not a name; one inside it is."""
    found = kinds("The server restarted. Later it paged Alice on call.")
    assert "The" not in found
    assert "Later" not in found
    assert "name" == found["Alice"]


def test_weekdays_and_months_are_not_names() -> None:
    """Capitalised weekdays, months and 'I' are not names."""
    assert not [f for f in facts("we met on Monday and I left in December") if f.kind == "name"]


def test_fact_keys_are_case_and_space_insensitive() -> None:
    """fact_keys compares facts in lower case with single spaces."""
    assert "3 gb" == Fact("3  GB", "number").key
    assert {"v1.2", "err_conn_reset", "3 gb"} == fact_keys("saw ERR_CONN_RESET on V1.2 with 3 gb")
    assert "inc-4411" in fact_keys("Ticket INC-4411 is open")


def test_normalise_lowers_and_collapses_spaces() -> None:
    """normalise() casefolds and collapses whitespace."""
    assert "a b c" == normalise("  A \t B\n\nC ")


def test_entities_keep_names_idents_urls_and_paths_only() -> None:
    """entities() keeps the naming facts and leaves out dates, times, versions and money."""
    text = (
        "On 2024-03-05 at 14:30 we paid $1,200 for v2.4.1 on db-prod-2, "
        "see https://example.com/x/y and /etc/app/app.conf with Alice."
    )
    assert {
        "db-prod-2",
        "https://example.com/x/y",
        "/etc/app/app.conf",
        "alice",
    } == entities(text)


def test_entities_leave_out_a_number_with_its_unit() -> None:
    """A number glued to its unit ("250ms") is a number, not an identifier or entity.

    Regression: with the identifier pattern tried before the number pattern, ``250ms`` was
    an entity and counted towards the topic entity bonus, against the module docstring.
    """
    assert frozenset() == entities("Latency was 250ms.")


def test_clauses_split_sentences_and_semicolons() -> None:
    """clauses() cuts at sentence ends, semicolons, newlines and spaced dashes."""
    text = "Disk hit 92%; we cleaned logs. The job resumed!\nAll good - Then we left."
    assert [
        "Disk hit 92%",
        "we cleaned logs.",
        "The job resumed!",
        "All good",
        "Then we left.",
    ] == clauses(text)


def test_clauses_do_not_split_after_abbreviations() -> None:
    """A title or abbreviation ("Dr.", "e.g.") does not end a sentence."""
    assert ["Met Dr. Alvarez at the clinic.", "She prescribed 20 mg."] == clauses(
        "Met Dr. Alvarez at the clinic. She prescribed 20 mg."
    )
    assert ["Use a tool, e.g. Grafana for dashboards."] == clauses(
        "Use a tool, e.g. Grafana for dashboards."
    )


def test_clauses_do_not_split_inside_versions_or_decimals() -> None:
    """A dot inside a version, a decimal or a file name does not end a sentence."""
    assert ["Upgraded to v2.4.1 and 3.5 GB of config.yaml stayed."] == clauses(
        "Upgraded to v2.4.1 and 3.5 GB of config.yaml stayed."
    )


def test_clauses_drop_empty_pieces() -> None:
    """Blank text and bare punctuation give no clauses."""
    assert [] == clauses("   ")
    assert [] == clauses(" ; . ; ")


def test_content_words_drop_stop_words() -> None:
    """content_words() keeps lower-cased meaningful words and drops stop words."""
    assert frozenset({"quick", "brown", "fox", "fast"}) == content_words(
        "The quick Brown fox is not very fast."
    )


def test_content_words_keep_contractions_and_hyphens_whole() -> None:
    """A hyphenated word or contraction is one content word."""
    assert {"db-prod-2", "isn't", "ready"} == content_words("db-prod-2 isn't ready")


def test_lost_facts_lists_what_the_summary_misses() -> None:
    """lost_facts() returns the source facts missing from the summary, as written."""
    sources = ["Ship v1.2 to db-prod-2 on 2024-01-02.", "We pinged Alice about err_conn_reset."]
    summary = "shipped V1.2 to DB-PROD-2; pinged alice"
    assert ["2024-01-02", "err_conn_reset"] == lost_facts(sources, summary)


def test_lost_facts_is_empty_when_every_fact_is_kept() -> None:
    """A summary holding every fact (case and spacing aside) loses nothing."""
    sources = ["Disk at 92% on db-prod-2.", "Disk at 92% on db-prod-2 again."]
    assert [] == lost_facts(sources, "db-prod-2:   disk  92%")


def test_lost_facts_reports_each_fact_once() -> None:
    """A fact repeated across sources is reported once when lost."""
    assert ["db-prod-2"] == lost_facts(["db-prod-2 failed", "db-prod-2 failed again"], "")


def test_lost_facts_does_not_accept_a_longer_number_for_a_fact() -> None:
    """A fact is not kept by a longer token that merely contains it ("80" in "8080").

    Regression: plain substring containment let a summary that changed port "80" into
    "8080" pass as keeping the fact, so the CheckedSummarizer would accept it.
    """
    assert ["80"] == lost_facts(["Open port 80."], "Open port 8080.")
    assert ["v1.2"] == lost_facts(["Pinned v1.2 here."], "Pinned v1.25 here.")
    assert [] == lost_facts(["Open port 80."], "port 80, opened")


def test_name_after_a_title_is_a_fact() -> None:
    """The name after a title ("Dr. Alvarez") is a name fact; the sentence opener is not.

    Regression: the ". " after "Dr" was taken for a sentence end, so "Alvarez" was skipped
    as a sentence-opening capital while "Met Dr" was taken for a name.
    """
    keys = fact_keys("Met Dr. Alvarez at the clinic.")
    assert any("alvarez" in key for key in keys)
    assert "met dr" not in keys
