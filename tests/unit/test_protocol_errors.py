"""The adapters' shared error helpers: the ancestry lookup of their error tables and the one
wording of pydantic's validation problems."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from engram.errors import (
    BusinessError,
    CircuitOpen,
    ConfigurationError,
    DatabaseUnavailable,
    DuplicateRequest,
    EngramError,
    InfrastructureError,
    NotFound,
    UniqueViolation,
    ValidationFailed,
    VersionConflict,
)
from engram.protocols.cli import output
from engram.protocols.cli.output import EXIT_CODES, exit_code, load_settings
from engram.protocols.errors import lookup, problems_of
from engram.protocols.http.problems import ERROR_STATUS, title_of
from engram.protocols.mcp.results import ERROR_KINDS

TABLE: dict[type[EngramError], str] = {
    InfrastructureError: "infrastructure",
    DatabaseUnavailable: "database unavailable",
    BusinessError: "business",
    EngramError: "default",
}


class _Unlisted(EngramError):
    """An error no table names."""


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    size: int = 0

    @field_validator("name")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


def _invalid(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Input.model_validate(data)
    return caught.value


def test_the_most_specific_listed_class_wins() -> None:
    """An error takes the entry of its nearest listed ancestor, not of a farther one."""
    assert "database unavailable" == lookup(TABLE, DatabaseUnavailable())
    assert "infrastructure" == lookup(TABLE, UniqueViolation(constraint="x"))
    assert "business" == lookup(TABLE, NotFound())


def test_an_unmapped_error_falls_back_to_the_tables_default() -> None:
    """An error with no listed ancestor but EngramError takes the table's EngramError entry."""
    assert "default" == lookup(TABLE, _Unlisted())
    assert "default" == lookup(TABLE, ConfigurationError())


def test_a_table_without_a_default_is_refused_loudly() -> None:
    """A table that lists no EngramError entry raises rather than inventing a default."""
    with pytest.raises(KeyError):
        lookup({BusinessError: "business"}, _Unlisted())


@pytest.mark.parametrize("table", [ERROR_STATUS, ERROR_KINDS, EXIT_CODES])
def test_every_adapter_table_has_a_default(table: dict[type[EngramError], object]) -> None:
    """Each adapter's table lists EngramError, so every engram error has an entry."""
    assert EngramError in table


def test_the_adapter_tables_map_by_ancestry() -> None:
    """HTTP, MCP and the CLI read their tables through the shared lookup."""
    conflict = VersionConflict(expected=1, actual=2)
    assert (409, "version-conflict") == lookup(ERROR_STATUS, conflict)
    assert (503, "unavailable") == lookup(
        ERROR_STATUS, CircuitOpen(dependency="postgres", retry_after_seconds=1)
    )
    assert "invalid_input" == lookup(ERROR_KINDS, ValidationFailed(errors=["x"]))
    assert "refused" == lookup(ERROR_KINDS, DuplicateRequest(agent_id="a", request_id="r"))
    assert "unavailable" == lookup(ERROR_KINDS, DatabaseUnavailable())
    assert 3 == exit_code(NotFound())
    assert 4 == exit_code(DuplicateRequest(agent_id="a", request_id="r"))
    assert 5 == exit_code(DatabaseUnavailable())
    assert 2 == exit_code(ConfigurationError())
    assert 1 == exit_code(_Unlisted())


@pytest.mark.parametrize(
    ("status", "title"),
    [
        (413, "Content Too Large"),
        (422, "Unprocessable Content"),
        (404, "Not Found"),
        (599, "Error"),
    ],
)
def test_a_problem_title_is_the_rfc_9110_phrase_whatever_the_python(
    status: int, title: str
) -> None:
    """A problem's title is RFC 9110's reason phrase, not the one the interpreter's version has."""
    assert title == title_of(status)


def test_validation_problems_name_where_and_what() -> None:
    """Each problem reads ``where: what``, with pydantic's "Value error, " prefix dropped."""
    problems = problems_of(_invalid({"name": " ", "size": "many", "colour": "red"}))
    assert [
        "name: must not be blank",
        "size: Input should be a valid integer, unable to parse string as an integer",
        "colour: Extra inputs are not permitted",
    ] == problems


def test_a_problem_of_the_whole_input_is_named_by_the_caller() -> None:
    """A problem with no location is named by ``whole`` (``input`` unless the caller says)."""
    assert ["input: Input should be a valid dictionary or instance of _Input"] == problems_of(
        _invalid("not a mapping")
    )
    assert problems_of(_invalid([]), whole="arguments")[0].startswith("arguments: ")


def test_validation_problems_never_quote_the_offending_value() -> None:
    """The value a client sent does not appear in the problems (it may be content)."""
    secret = "a-secret-value-that-is-not-an-int"
    assert not any(
        secret in problem for problem in problems_of(_invalid({"name": "n", "size": secret}))
    )


def test_the_cli_output_module_does_not_import_the_cli_entry_point() -> None:
    """``cli/output.py`` imports nothing from ``cli/main.py`` (main imports it: no cycle)."""
    tree = ast.parse(Path(output.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    imported |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert "engram.protocols.cli.main" not in imported
    assert not any(
        isinstance(node, ast.ImportFrom)
        and node.module == "engram.protocols.cli"
        and any(alias.name == "main" for alias in node.names)
        for node in ast.walk(tree)
    )


def test_an_invalid_setting_is_named_without_echoing_any_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad ENGRAM_ setting ends a CLI command with exit 2 naming the setting; no value of
    the environment (a database URL's password, say) reaches the terminal."""
    monkeypatch.setenv("ENGRAM_DATABASE_URL", "postgresql://u:s3cret-pw@h/db")
    monkeypatch.setenv("ENGRAM_PORT", "not-a-port")
    with pytest.raises(typer.Exit) as ended:
        load_settings()
    printed = capsys.readouterr().err
    assert (2, True, False) == (ended.value.exit_code, "port" in printed, "s3cret" in printed)
