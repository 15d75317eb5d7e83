"""The one exception hierarchy of engram.

Every error the kernel raises on purpose derives from :class:`EngramError`. A subclass's
docstring is its default message; subclasses that carry data take it as keyword arguments
so adapters (HTTP, MCP, CLI) can map them to statuses and exit codes from one table each.
"""

from __future__ import annotations


class EngramError(Exception):
    """An engram operation failed."""

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (type(self).__doc__ or "engram error").strip()
        super().__init__(self.message)


# --- configuration and startup ---------------------------------------------------------------


class ConfigurationError(EngramError):
    """The configuration is invalid."""


class DataDirError(ConfigurationError):
    """The data directory cannot be created or used."""


class EmbeddedServerError(EngramError):
    """The embedded PostgreSQL server could not be started or stopped."""


class ModelFilesError(EngramError):
    """The embedding model files are missing or incomplete."""


class MigrationError(EngramError):
    """The database schema could not be migrated."""


# --- infrastructure ----------------------------------------------------------------------------


class InfrastructureError(EngramError):
    """An infrastructure dependency failed."""


class DatabaseError(InfrastructureError):
    """The database reported an error."""

    def __init__(self, message: str | None = None, *, sqlstate: str | None = None) -> None:
        self.sqlstate = sqlstate
        super().__init__(message)


class DatabaseUnavailable(DatabaseError):
    """The database cannot be reached right now; the operation may be retried."""


class TransientDatabaseError(DatabaseError):
    """The database aborted the operation for a transient reason; it may be retried."""


class DatabaseInterrupted(DatabaseError):
    """The database stopped the statement before it finished: cancelled (by an operator or a
    timeout), out of a resource (disk, memory), an I/O error (SQLSTATE classes 53, 57, 58).
    Nothing was committed. Not retried here: the caller may send the request again later."""


class UniqueViolation(DatabaseError):
    """A uniqueness constraint refused the write."""

    def __init__(self, *, constraint: str | None, message: str | None = None) -> None:
        self.constraint = constraint
        super().__init__(
            message or f"unique constraint {constraint!r} refused the write", sqlstate="23505"
        )


class PermissionDenied(DatabaseError):
    """The database role is not allowed to do this (SQLSTATE 42501)."""


class CircuitOpen(InfrastructureError):
    """A dependency failed repeatedly; calls are refused until it recovers."""

    def __init__(self, *, dependency: str, retry_after_seconds: float) -> None:
        self.dependency = dependency
        self.retry_after_seconds = retry_after_seconds
        super().__init__(f"{dependency} is failing; retry after {retry_after_seconds:.0f} s")


class EmbeddingError(InfrastructureError):
    """The embedding model failed to embed the text."""


class EmbeddingTimeout(EmbeddingError):
    """The embedding model did not answer in time."""

    def __init__(self, *, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        super().__init__(f"embedding did not finish within {timeout_seconds:g} s")


class WebhookUnavailable(InfrastructureError):
    """The escalation webhook could not be reached, or answered 5xx or 429, after its own
    retries; the event stays in the outbox to be delivered again."""


# --- memory and governance (business errors; never trip a circuit breaker) --------------------


class BusinessError(EngramError):
    """The request was understood and refused."""


class ValidationFailed(BusinessError):
    """The record does not satisfy its schema."""

    def __init__(self, *, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors) if errors else "validation failed")


class StaleCursor(ValidationFailed):
    """The cursor is of a format this listing no longer takes: list again from the start."""


class VersionConflict(BusinessError):
    """The record changed since the caller read it (or another writer won the race)."""

    def __init__(self, *, expected: int | None, actual: int | None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"expected version {expected}, current version is {actual}")


class DuplicateRequest(BusinessError):
    """This agent already used this request id; its first result is the answer."""

    def __init__(self, *, agent_id: str, request_id: str) -> None:
        self.agent_id = agent_id
        self.request_id = request_id
        super().__init__(f"request id {request_id!r} of agent {agent_id!r} was already used")


class Quarantine(BusinessError):
    """The quarantine of a record could not be changed as asked."""


class ConsolidationConflict(BusinessError):
    """A consolidation batch cannot be changed as asked now: it was rolled back already, or
    one of its records moved on while the rollback ran (nothing was changed; retry)."""


class JobBusy(BusinessError):
    """A background job cannot start now: another kernel (or this one) is running it."""


class PromotionRefused(BusinessError):
    """A trained advisor may not become the active one: it was not evaluated, it did not win
    on reward, or it lost on safety (ADR-020)."""


# --- identity and adapters --------------------------------------------------------------------


class Unauthenticated(BusinessError):
    """No valid agent token was presented."""


class Forbidden(BusinessError):
    """The authenticated caller is not allowed to do this."""


class RateLimited(BusinessError):
    """The caller did this too often; it may again after ``retry_after_seconds``. (The
    Gate's own rate limit is a decision in its result, not this error.)"""

    def __init__(self, message: str, *, retry_after_seconds: float) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(message)


class NotFound(BusinessError):
    """No such object (or none the caller may see)."""


class AlreadyExists(BusinessError):
    """An object with this name already exists."""
