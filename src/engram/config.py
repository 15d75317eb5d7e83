"""Settings of the kernel, read from ``ENGRAM_*`` environment variables.

One :class:`EngramSettings` is built by the composition root and passed down; nothing else
reads the environment. Every field here is listed, with its default, in the README.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: Dimension of the ``vector`` column; a model must produce exactly this many values.
EMBEDDING_DIMENSION = 384
#: The settings that are durations (schedules, windows, back-offs): seconds per unit.
DURATION_UNITS = {
    "consolidation_light_window_hours": 3600.0,
    "consolidation_light_minutes": 60.0,
    "consolidation_watch_seconds": 1.0,
    "reembed_minutes": 60.0,
    "pii_rescan_minutes": 60.0,
    "decay_refresh_minutes": 60.0,
    "retention_days": 86400.0,
    "job_backoff_seconds": 1.0,
    "job_backoff_max_seconds": 1.0,
}
#: What a metrics token may hold: the characters of an RFC 6750 bearer token (``token68``),
#: so that every HTTP client and Prometheus send it as it is.
METRICS_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")
METRICS_TOKEN_MIN_LENGTH = 16
METRICS_TOKEN_MAX_LENGTH = 512
#: The longest a schedule's interval may be: far enough to mean "never" (a benchmark sets
#: twice the time since the epoch), short enough for any due instant to stay a date.
LONGEST_SECONDS = 1000 * 365.25 * 86400


class EngramSettings(BaseSettings):
    """Runtime configuration of one kernel instance."""

    # Errors never echo a value: URLs and keys among them may carry a password. No setting
    # means anything by an infinite number or NaN (each has its own word for "never": 0, or a
    # very long duration), so every float refuses them.
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_",
        extra="ignore",
        frozen=True,
        hide_input_in_errors=True,
        allow_inf_nan=False,
    )

    # --- storage ---
    database_url: SecretStr | None = Field(
        default=None,
        description="Runtime-role URL of an external PostgreSQL; unset starts the embedded one.",
    )
    migration_database_url: SecretStr | None = Field(
        default=None,
        description="Owner/migration-role URL of the external server; needed to migrate it.",
    )
    data_dir: Path = Field(
        default=Path(".engram"),
        description="Where the embedded server keeps its data and the model is assembled.",
    )
    migrate_on_start: bool = Field(
        default=True,
        description="Apply pending migrations when the kernel opens (if a migration URL is known).",
    )
    db_pool_min_size: int = Field(default=2, ge=0)
    db_pool_max_size: int = Field(default=10, ge=1)
    db_command_timeout_seconds: float = Field(default=30.0, gt=0)

    # --- embeddings ---
    embedding_model_path: Path | None = Field(
        default=None,
        description="Directory of an ONNX model; unset assembles all-MiniLM-L6-v2 in the data dir.",
    )
    embedding_model_name: str = Field(default="sentence-transformers/all-MiniLM-L6-v2-int8")
    embedding_pooling: Literal["mean", "cls"] = "mean"
    embedding_workers: int = Field(
        default=0,
        ge=0,
        le=16,
        description="Model worker processes; 0 runs the model on a thread of the kernel's process.",
    )
    embedding_threads: int = Field(default=2, ge=1, le=16)
    embedding_spin: bool = Field(
        default=False, description="Let the model's idle threads spin (lower latency, more CPU)."
    )
    embedding_batch_size: int = Field(default=16, ge=1, le=256)
    embedding_timeout_seconds: float = Field(default=10.0, gt=0)

    # --- server ---
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["auto", "json", "console"] = "auto"

    http_request_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description=(
            "How long a connection may take to send a whole request (headers and body), "
            "counted from its first byte, or to send a first byte at all (408, then closed)."
        ),
    )

    readiness_cache_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How long /readyz reuses the outcome of a check that writes (0: never).",
    )

    # --- agents ---
    agent_token: SecretStr | None = Field(
        default=None, description="The agent token `engram mcp` (stdio) acts with."
    )

    metrics_token: SecretStr | None = Field(
        default=None,
        description="A scrape-only bearer token for /metrics (and /readyz's details); it "
        "grants nothing else. Unset: only agents cleared to read every access level scrape.",
    )

    # --- notifications ---
    webhook_url: SecretStr | None = Field(
        default=None, description="Where escalations are POSTed as JSON (unset: no webhook)."
    )

    # --- audit ---
    audit_checkpoint_every: int = Field(
        default=1000,
        ge=0,
        description="Seal an audit checkpoint every this many appends (0: never).",
    )
    audit_checkpoint_seconds: float = Field(
        default=300.0,
        ge=0,
        description="Seal one, too, when this long has passed since the last (0: never).",
    )

    # --- consolidation ---
    consolidation_batch_size: int = Field(
        default=100, ge=1, le=10_000, description="Sources per consolidation batch (transaction)."
    )
    consolidation_max_candidates: int = Field(
        default=20_000,
        ge=1,
        description="Fast-path records of each access level one pass reads at most.",
    )
    consolidation_light_window_hours: float = Field(
        default=24.0, gt=0, description="A light pass covers records ingested this recently."
    )
    consolidation_event_threshold: int = Field(
        default=5, ge=2, description="Records on one topic that make an event-driven pass act."
    )
    consolidation_max_seconds: float = Field(
        default=1800.0, gt=0, description="A consolidation pass starts no batch after this long."
    )
    fast_path_limit: int = Field(
        default=10_000,
        ge=1,
        description="Active fast-path records of one access level above which pressure acts.",
    )
    consolidation_hour: int = Field(
        default=3, ge=0, le=23, description="UTC hour of the nightly deep consolidation pass."
    )
    consolidation_light_minutes: float = Field(
        default=60.0, gt=0, description="Minutes between light consolidation passes."
    )
    consolidation_watch_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often the event and pressure triggers are checked.",
    )
    consolidation_decay_threshold: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Fast-path records decayed below this count as consolidation backlog.",
    )
    summarizer_url: SecretStr | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible LLM summariser; unset: extractive only.",
    )
    summarizer_model: str = Field(
        default="gpt-4o-mini", description="Model the LLM summariser asks."
    )
    summarizer_api_key: SecretStr | None = Field(default=None, description="Its bearer token.")
    summarizer_timeout_seconds: float = Field(default=30.0, gt=0)

    # --- background jobs ---
    scheduler: bool = Field(
        default=True,
        description="Run the background jobs in `engram serve` (off: only `engram worker` does).",
    )
    scheduler_poll_seconds: float = Field(
        default=5.0, ge=0.05, le=3600, description="How often a scheduler looks for due jobs."
    )
    reembed_minutes: float = Field(
        default=5.0, gt=0, description="Minutes between re-embedding passes over degraded records."
    )
    pii_rescan_minutes: float = Field(
        default=60.0, gt=0, description="Minutes between PII rescans of records screened earlier."
    )
    decay_refresh_minutes: float = Field(
        default=60.0, gt=0, description="Minutes between refreshes of every decay score."
    )
    retention_days: float = Field(
        default=30.0,
        gt=0,
        description="Delivered outbox events, closed escalations and job runs kept this long.",
    )
    outbox_max_attempts: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="Deliveries of one event before a subscriber's infrastructure failure is "
        "given up on (a consolidation source's release is then finished by the next scheduled "
        "pass's sweep).",
    )
    outbox_retry_seconds: float = Field(
        default=1.0,
        ge=0.01,
        le=300,
        description="First wait before a deferred event is delivered again (doubles per "
        "attempt, at most 300 s; at least 10 ms, so a database that is down is not polled "
        "in a busy loop).",
    )
    job_backoff_seconds: float = Field(
        default=60.0,
        gt=0,
        description="First wait before a failed job is retried (doubles); also the event and "
        "pressure consolidation jobs' wait before a level whose batches failed is read again.",
    )
    job_backoff_max_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="Longest wait between retries of a failing job (or consolidation level).",
    )

    # --- the Gate's advisor (ADR-020) ---
    advisor: Literal["heuristic", "rl"] = Field(
        default="heuristic",
        description="Layer 2: the heuristic rules, or the active trained policy (`rl`; the "
        "heuristic while no model is active).",
    )
    advisor_shadow: bool = Field(
        default=False,
        description="Run the newest trained candidate beside the active advisor on every write "
        "and record its advice in the audit row, without acting on it.",
    )
    advisor_reload_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How often a kernel looks for a promoted or rolled-back model.",
    )
    advisor_train_feedback: int = Field(
        default=500,
        ge=1,
        description="New feedback rows since the last training that start one (pressure).",
    )

    # --- resilience ---
    breaker_fail_max: int = Field(default=5, ge=1)
    breaker_reset_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="The longest the database's circuit breaker stays open before a probe.",
    )
    breaker_first_reset_seconds: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        description="How long it stays open the first time; each failed probe doubles it.",
    )
    retry_attempts: int = Field(default=3, ge=0, le=10)
    retry_initial_wait_seconds: float = Field(default=1.0, ge=0)

    @field_validator(*DURATION_UNITS)
    @classmethod
    def _duration(cls, value: float, info: ValidationInfo) -> float:
        """A duration that becomes a schedule, a window or a back-off is a finite one of
        at least a second and at most a thousand years (else the kernel fails as it opens)."""
        seconds = value * DURATION_UNITS[str(info.field_name)]
        if not (math.isfinite(seconds) and 1.0 <= seconds <= LONGEST_SECONDS):
            raise ValueError("must be at least one second and at most 1000 years")
        return value

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token(cls, value: SecretStr | None) -> SecretStr | None:
        """A metrics token is long enough to guess at no better than any secret, travels in
        a header as it is, and can never be taken for an agent token."""
        if value is None:
            return None
        token = value.get_secret_value()
        if not METRICS_TOKEN_MIN_LENGTH <= len(token) <= METRICS_TOKEN_MAX_LENGTH:
            raise ValueError(
                f"must be {METRICS_TOKEN_MIN_LENGTH} to {METRICS_TOKEN_MAX_LENGTH} characters "
                "long (e.g. `openssl rand -hex 32`)"
            )
        if not METRICS_TOKEN.fullmatch(token):
            raise ValueError("may hold only letters, digits and . _ ~ + / - (then = padding)")
        if token.startswith("engram_"):
            raise ValueError("may not start with engram_, which marks agent tokens")
        return value

    @field_validator("data_dir", "embedding_model_path")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("database_url", "migration_database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        """A malformed URL is a configuration error here, not "database unreachable" at
        connect time. The messages never quote the URL: it may hold a password."""
        if value is not None:
            check_postgres_url(value.get_secret_value())
        return value

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, value: SecretStr | None) -> SecretStr | None:
        """A URL the webhook cannot POST to is a configuration error here, not a failed
        send of every escalation later. The messages never quote it (a password, a token)."""
        if value is not None:
            check_webhook_url(value.get_secret_value())
        return value

    @property
    def embedded(self) -> bool:
        """True when the kernel runs its own PostgreSQL in the data dir."""
        return self.database_url is None

    @property
    def model_dir(self) -> Path:
        """Directory the embedding model is loaded from."""
        if self.embedding_model_path is not None:
            return self.embedding_model_path
        return self.data_dir / "models" / "all-MiniLM-L6-v2-int8"

    @property
    def pgdata_dir(self) -> Path:
        """Data directory of the embedded PostgreSQL server."""
        return self.data_dir / "pg"


def check_postgres_url(url: str) -> None:
    """Raise ``ValueError`` unless ``url`` is a well-formed PostgreSQL URL."""
    try:
        parts = urlsplit(url)
        port = parts.port  # a port that is not a number raises here
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if parts.scheme not in {"postgresql", "postgres"}:
        raise ValueError("must start with postgresql:// (or postgres://)")
    if not parts.hostname and "host=" not in parts.query:
        raise ValueError("names no host (postgresql://user:password@host:port/database)")
    if port == 0:
        raise ValueError("port 0 is not a PostgreSQL port")


def check_webhook_url(url: str) -> None:
    """Raise ``ValueError`` unless ``url`` is an http(s) URL with a host (and a numeric port)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ValueError("not a valid URL") from None
    if parts.scheme not in {"http", "https"}:
        raise ValueError("must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("names no host (https://host/path)")
