"""The one boundary where driver errors become domain errors."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.core.errors import AppError, Conflict, Unavailable
from app.db.outage import connection_lost

# Raised when the server is unreachable, restarting, or the pool is exhausted.
CONNECTIVITY_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ConnectionError,
    TimeoutError,
    PoolTimeout,
    InterfaceError,
    OperationalError,
)


class StaleWrite(RuntimeError):
    """A compare-and-set matched fewer rows than expected: a row changed under the writer."""


def constraint_name(exc: DBAPIError) -> str | None:
    """asyncpg puts the constraint on the driver exception behind SQLAlchemy's wrapper."""
    cause = getattr(exc.orig, "__cause__", None)
    return getattr(cause, "constraint_name", None)


def is_connectivity_error(exc: BaseException) -> bool:
    """The database is unavailable (a lost connection, or the pool or server busy),
    rather than refusing what was asked."""
    return connection_lost(exc) or isinstance(exc, CONNECTIVITY_ERRORS)


def translate(exc: BaseException) -> AppError:
    """A domain error for a database failure; unknown failures stay internal (500)."""
    if isinstance(exc, AppError):
        return exc
    if is_connectivity_error(exc):
        return Unavailable("the database is unavailable; retry shortly")
    if isinstance(exc, StaleWrite):
        return Conflict("the resource changed concurrently; retry")
    if isinstance(exc, IntegrityError):
        name = constraint_name(exc) or "a constraint"
        return Conflict(f"the change conflicts with existing data ({name})")
    # Kept as the cause, so that whoever logs the 500 logs what actually failed.
    internal = AppError()
    internal.__cause__ = exc
    return internal
