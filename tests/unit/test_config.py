"""Settings from ENGRAM_* environment variables."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from engram.config import EngramSettings


def test_defaults_run_embedded_in_the_local_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no environment the kernel is embedded, in ./.engram, on 127.0.0.1:8765."""
    for name in ("ENGRAM_DATABASE_URL", "ENGRAM_DATA_DIR", "ENGRAM_PORT", "ENGRAM_HOST"):
        monkeypatch.delenv(name, raising=False)
    settings = EngramSettings()
    assert settings.embedded
    assert Path(".engram") == settings.data_dir
    assert Path(".engram/pg") == settings.pgdata_dir
    assert Path(".engram/models/all-MiniLM-L6-v2-int8") == settings.model_dir
    assert ("127.0.0.1", 8765) == (settings.host, settings.port)


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """ENGRAM_* variables set the matching fields; a URL switches off the embedded server."""
    monkeypatch.setenv("ENGRAM_DATABASE_URL", "postgresql://engram_runtime:pw@db:5432/engram")
    monkeypatch.setenv("ENGRAM_EMBEDDING_MODEL_PATH", "/models/bge-small")
    monkeypatch.setenv("ENGRAM_PORT", "9000")
    settings = EngramSettings()
    assert not settings.embedded
    assert Path("/models/bge-small") == settings.model_dir
    assert 9000 == settings.port


def test_secrets_are_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Database URLs (which may hold passwords) never appear in the settings' repr."""
    monkeypatch.setenv("ENGRAM_DATABASE_URL", "postgresql://u:hunter2@db/engram")
    assert "hunter2" not in repr(EngramSettings())


def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port outside 0-65535 is a configuration error, not a silent default."""
    monkeypatch.setenv("ENGRAM_PORT", "70000")
    with pytest.raises(ValidationError):
        EngramSettings()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not a url", "must start with postgresql://"),
        ("mysql://u:p@db/engram", "must start with postgresql://"),
        ("postgresql://u:secret@db:port/engram", "not a valid URL"),
        ("postgresql://u:secret@[::1/engram", "not a valid URL"),
        ("postgresql:///engram", "names no host"),
    ],
)
def test_a_malformed_database_url_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, url: str, problem: str
) -> None:
    """A URL that cannot be a PostgreSQL URL is refused by the settings (never quoted: it may
    hold a password), instead of surfacing later as "database unreachable"."""
    monkeypatch.setenv("ENGRAM_DATABASE_URL", url)
    with pytest.raises(ValidationError, match=problem) as raised:
        EngramSettings()
    assert "secret" not in str(raised.value)


def test_well_formed_database_urls_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """TCP and unix-socket URLs, with either scheme, pass."""
    for url in (
        "postgresql://engram:pw@db.internal:5432/engram",
        "postgres://engram@localhost/engram",
        "postgresql:///engram?host=/var/run/postgresql",
    ):
        monkeypatch.setenv("ENGRAM_DATABASE_URL", url)
        assert not EngramSettings().embedded


def test_an_interval_meant_as_never_is_accepted_and_an_impossible_one_is_not() -> None:
    """Twice the minutes since the epoch (how `scheduler_bench` keeps the light pass from
    running) is a valid interval; an interval no date can follow is refused."""
    never = 2 * time.time() / 60
    assert never == EngramSettings(consolidation_light_minutes=never).consolidation_light_minutes
    with pytest.raises(ValidationError, match="at most 1000 years"):
        EngramSettings(consolidation_light_minutes=1e300)


#: Every float setting: none of them has a meaning for an infinite number or NaN.
FLOAT_SETTINGS = sorted(
    name for name, field in EngramSettings.model_fields.items() if field.annotation is float
)


def test_the_float_settings_are_found() -> None:
    """The parametrised list below is the settings' floats, not an empty list."""
    assert {"readiness_cache_seconds", "db_command_timeout_seconds"} <= set(FLOAT_SETTINGS)
    assert len(FLOAT_SETTINGS) >= 20


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "nan", "NaN", "1e400"])
@pytest.mark.parametrize("name", FLOAT_SETTINGS)
def test_no_float_setting_accepts_a_value_that_is_not_finite(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """ENGRAM_<NAME>=inf, nan or a number past the float range is refused with a message that
    names the setting and says it must be finite (inf once made /readyz cache forever)."""
    monkeypatch.setenv(f"ENGRAM_{name.upper()}", value)
    with pytest.raises(ValidationError, match="finite number") as raised:
        EngramSettings()
    assert name in str(raised.value)


def test_readiness_cache_seconds_refuses_inf_nan_and_negative_but_keeps_zero() -> None:
    """The readiness cache takes 0 (run every probe on every request) and any finite positive
    number of seconds; inf, NaN and a negative number are refused."""
    assert 0.0 == EngramSettings(readiness_cache_seconds=0).readiness_cache_seconds
    assert 3600.0 == EngramSettings(readiness_cache_seconds=3600).readiness_cache_seconds
    for value, problem in [
        (float("inf"), "finite number"),
        (float("nan"), "finite number"),
        (-1.0, "greater than or equal to 0"),
    ]:
        with pytest.raises(ValidationError, match=problem):
            EngramSettings(readiness_cache_seconds=value)
