"""The error tree. Each class names a stable `code` and an HTTP status; `api/problems.py`
renders any of them as an RFC 9457 problem document.

    AppError (500 internal)
    ├── Unauthorized (401 unauthorized)
    ├── NotFound (404 not_found)
    ├── Conflict (409 conflict)
    │   ├── VersionConflict (409 version_conflict: expected, current)
    │   ├── InvalidTransition (409 invalid_transition: current, target, allowed)
    │   │   └── ApprovalExpired (409 approval_expired: expires_at, decision)
    │   └── IdempotencyKeyReused (409 idempotency_key_reused)
    ├── PayloadTooLarge (413 payload_too_large)
    ├── ValidationFailed (422 validation_error: errors[field, message])
    └── Unavailable (503 unavailable)
        ├── QueueFull (503 queue_full: retry_after_s)
        ├── TooManyStreams (503 too_many_streams: limit, retry_after_s)
        └── ShuttingDown (503 shutting_down)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


class AppError(Exception):
    """The server could not complete the request."""

    code: ClassVar[str] = "internal"
    status_code: ClassVar[int] = 500

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (self.__doc__ or self.code).strip()
        super().__init__(self.detail)

    @property
    def title(self) -> str:
        return (type(self).__doc__ or self.code).strip().splitlines()[0]

    def extensions(self) -> dict[str, Any]:
        """Typed fields a client may act on, added to the problem document."""
        return {}

    def headers(self) -> dict[str, str]:
        return {}


class Unauthorized(AppError):
    """A valid bearer API key is required."""

    code = "unauthorized"
    status_code = 401

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class NotFound(AppError):
    """The resource does not exist."""

    code = "not_found"
    status_code = 404

    def __init__(self, kind: str, resource_id: str) -> None:
        self.kind = kind
        self.resource_id = resource_id
        super().__init__(f"{kind} {resource_id!r} does not exist")

    def extensions(self) -> dict[str, Any]:
        return {"resource": self.kind, "id": self.resource_id}


class Conflict(AppError):
    """The request conflicts with the current state of the resource."""

    code = "conflict"
    status_code = 409


class VersionConflict(Conflict):
    """The resource changed since the version you sent."""

    code = "version_conflict"

    def __init__(self, expected: int, current: int) -> None:
        self.expected = expected
        self.current = current
        super().__init__(
            f"expected version {expected} but the current version is {current}; "
            "re-read the resource and retry"
        )

    def extensions(self) -> dict[str, Any]:
        return {"expected_version": self.expected, "current_version": self.current}


class InvalidTransition(Conflict):
    """The state machine does not allow this transition."""

    code = "invalid_transition"

    def __init__(self, current: str, target: str, allowed: Iterable[str], why: str = "") -> None:
        self.current = str(current)
        self.target = str(target)
        self.allowed = sorted(str(a) for a in allowed)
        targets = ", ".join(self.allowed) or "none"
        super().__init__(
            f"cannot move from '{self.current}' to '{self.target}'{why}; "
            f"allowed from here: {targets}"
        )

    def extensions(self) -> dict[str, Any]:
        return {"current": self.current, "target": self.target, "allowed": self.allowed}


class ApprovalExpired(InvalidTransition):
    """The approval expired before this decision; its timeout policy decided it."""

    code = "approval_expired"

    def __init__(
        self, target: str, *, expires_at: str | None = None, decision: str | None = None
    ) -> None:
        self.expires_at = expires_at
        self.decision = decision
        effect = f": {decision}" if decision else ""
        super().__init__(
            "expired", target, (), f" (nobody answered in time; its timeout policy decided{effect})"
        )

    def extensions(self) -> dict[str, Any]:
        return {**super().extensions(), "expires_at": self.expires_at, "decision": self.decision}


class IdempotencyKeyReused(Conflict):
    """This Idempotency-Key was already used with a different request body."""

    code = "idempotency_key_reused"


class PayloadTooLarge(AppError):
    """The request body is larger than this server accepts."""

    code = "payload_too_large"
    status_code = 413

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        super().__init__(f"request bodies are limited to {limit_bytes} bytes")

    def extensions(self) -> dict[str, Any]:
        return {"limit_bytes": self.limit_bytes}


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str


class ValidationFailed(AppError):
    """The request is not valid."""

    code = "validation_error"
    status_code = 422

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))

    @classmethod
    def field(cls, field: str, message: str) -> ValidationFailed:
        return cls([FieldError(field, message)])

    def extensions(self) -> dict[str, Any]:
        return {"errors": [{"field": e.field, "message": e.message} for e in self.errors]}


class Unavailable(AppError):
    """The service cannot serve this request right now; retry later."""

    code = "unavailable"
    status_code = 503
    retry_after_s: int = 5

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class QueueFull(Unavailable):
    """Too many writes are queued; retry after a moment."""

    code = "queue_full"

    def __init__(self, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        super().__init__()

    def extensions(self) -> dict[str, Any]:
        return {"retry_after_s": self.retry_after_s}


class TooManyStreams(Unavailable):
    """This process serves as many event streams as it may; retry after a moment."""

    code = "too_many_streams"

    def __init__(self, limit: int, retry_after_s: int) -> None:
        self.limit = limit
        self.retry_after_s = retry_after_s
        super().__init__(f"at most {limit} event streams are open at once on this process")

    def extensions(self) -> dict[str, Any]:
        return {"limit": self.limit, "retry_after_s": self.retry_after_s}


class ShuttingDown(Unavailable):
    """This process is shutting down; retry against another one or after the restart."""

    code = "shutting_down"
