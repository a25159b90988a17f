"""The error tree. Each class names a stable `code` and an HTTP status; `http/problems.py`
renders any of them as an RFC 9457 problem document.

    AppError (500 internal)
    ├── Unauthorized (401 unauthorized)
    │   └── (core/signatures.py) SignatureMissing, SignatureInvalid, SignatureExpired
    ├── CsrfFailed (403 csrf_failed)
    ├── HostRefused (403 host_refused), CrossOriginRefused (403 cross_origin_refused)
    ├── (approvals/engine/approvals.py) NotAReviewer (403 not_a_reviewer)
    ├── NotFound (404 not_found)
    ├── Conflict (409 conflict)
    │   ├── VersionConflict (409 version_conflict: expected, current)
    │   ├── InvalidTransition (409 invalid_transition: current, target, allowed)
    │   │   └── ApprovalExpired (409 approval_expired: expires_at, decision)
    │   ├── IdempotencyKeyReused (409 idempotency_key_reused)
    │   ├── (core/signatures.py) SignatureReused; (triggers/engine) TriggerDisabled
    │   ├── (routing/engine) Unroutable (409 unroutable), AgentAtCapacity
    │   ├── (sprints/engine/sprints) SprintAlreadyActive, SprintLocked, TaskInAnotherSprint
    │   └── (workspaces/engine) WorkspaceInUse, WorktreeDiffUnavailable
    ├── PayloadTooLarge (413 payload_too_large)
    ├── ValidationFailed (422 validation_error: errors[field, message])
    └── Unavailable (503 unavailable)
        ├── QueueFull (503 queue_full: retry_after_s)
        ├── TooManyStreams (503 too_many_streams: limit, retry_after_s)
        └── ShuttingDown (503 shutting_down)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar


class ProblemCode(StrEnum):
    """Every `code` a problem document may carry: stable, match on it. Each error class
    names its own; tests/guards/test_openapi.py holds this list to the classes."""

    INTERNAL = "internal"  # a bug or an unexpected failure (500)
    UNAUTHORIZED = "unauthorized"  # no valid API key (401)
    CSRF_FAILED = "csrf_failed"  # a session's unsafe request without its CSRF token (403)
    HOST_REFUSED = "host_refused"  # keyless service, Host not a loopback name (403)
    CROSS_ORIGIN_REFUSED = "cross_origin_refused"  # keyless service, another site's page (403)
    NOT_FOUND = "not_found"  # no such resource, or no route for the path (404)
    METHOD_NOT_ALLOWED = "method_not_allowed"  # the path has no such method (405; `Allow`)
    HTTP_ERROR = "http_error"  # any other HTTP-level refusal
    CONFLICT = "conflict"  # the change conflicts with the stored data (409)
    VERSION_CONFLICT = "version_conflict"  # the resource changed since the version sent (409)
    INVALID_TRANSITION = "invalid_transition"  # the state machine forbids it (409)
    APPROVAL_EXPIRED = "approval_expired"  # its timeout policy decided it already (409)
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"  # same key, another body (409)
    AGENT_IN_USE = "agent_in_use"  # runs refer to the agent (409)
    WORKFLOW_IN_USE = "workflow_in_use"  # the workflow has running executions (409)
    UNROUTABLE = "unroutable"  # no agent can take the task now; `reason` says why (409)
    AGENT_AT_CAPACITY = "agent_at_capacity"  # the agent holds its most tasks already (409)
    NOT_A_REVIEWER = "not_a_reviewer"  # the task names its reviewers; you are not one (403)
    RESUME_UNAVAILABLE = "resume_unavailable"  # the run cannot be resumed (409)
    LANE_BUSY = "lane_busy"  # the lane is busy and the run asked not to wait (409)
    COORDINATION_RUNNING = "coordination_running"  # the task is being coordinated (409)
    WIP_LIMIT_REACHED = "wip_limit_reached"  # the board's column is full (409)
    TRIGGER_DISABLED = "trigger_disabled"  # a disabled trigger does not fire (409)
    SPRINT_ALREADY_ACTIVE = "sprint_already_active"  # the project has an active sprint (409)
    SPRINT_LOCKED = "sprint_locked"  # the sprint's status does not allow the change (409)
    TASK_IN_ANOTHER_SPRINT = "task_in_another_sprint"  # a task is in a sprint not completed (409)
    WORKSPACE_IN_USE = "workspace_in_use"  # the workspace has worktrees not yet merged (409)
    WORKTREE_NOT_MERGEABLE = "worktree_not_mergeable"  # only a queued worktree merges (409)
    WORKTREE_DIFF_UNAVAILABLE = "worktree_diff_unavailable"  # its branch or repo is gone (409)
    SIGNATURE_MISSING = "signature_missing"  # a webhook delivery came unsigned (401)
    SIGNATURE_INVALID = "signature_invalid"  # its signature does not match its body (401)
    SIGNATURE_EXPIRED = "signature_expired"  # its timestamp is outside the tolerance (401)
    SIGNATURE_REUSED = "signature_reused"  # a signature already accepted, replayed (409)
    PAYLOAD_TOO_LARGE = "payload_too_large"  # the body is over the limit (413)
    VALIDATION_ERROR = "validation_error"  # the request is not valid; `errors` says why (422)
    WORKFLOW_INVALID = "workflow_invalid"  # the workflow breaks its rules; `errors` (422)
    UNAVAILABLE = "unavailable"  # e.g. the database is down; retry (503)
    QUEUE_FULL = "queue_full"  # too many writes queued; retry (503)
    WORKSPACE_FULL = "workspace_full"  # every worktree of the workspace is in use; retry (503)
    TOO_MANY_STREAMS = "too_many_streams"  # the process's event streams are full (503)
    SHUTTING_DOWN = "shutting_down"  # the process is stopping (503)


class AppError(Exception):
    """The server could not complete the request."""

    code: ClassVar[ProblemCode] = ProblemCode.INTERNAL
    status_code: ClassVar[int] = 500

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or _prose(type(self))
        super().__init__(self.detail)

    @property
    def title(self) -> str:
        """The docstring's first sentence (up to a `.` or `;` that ends a clause)."""
        return re.split(r"(?<=[.;])\s", _prose(type(self)))[0].removesuffix(";").rstrip(".") + "."

    def extensions(self) -> dict[str, Any]:
        """Typed fields a client may act on, added to the problem document."""
        return {}

    def headers(self) -> dict[str, str]:
        return {}


def _prose(error: type[AppError]) -> str:
    """An error class's docstring as one line of text."""
    return " ".join((error.__doc__ or error.code).split())


class Unauthorized(AppError):
    """A valid bearer API key is required."""

    code = ProblemCode.UNAUTHORIZED
    status_code = 401

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class CsrfFailed(AppError):
    """A request made with the dashboard's session cookie must send the session's CSRF
    token in the `X-CSRF-Token` header to change anything."""

    code = ProblemCode.CSRF_FAILED
    status_code = 403


class HostRefused(AppError):
    """A service without API keys answers only requests addressed to a loopback name
    (`localhost`, `127.0.0.1`, `[::1]`) or to a name in `LOOPWRIGHT_SERVER__ALLOWED_HOSTS`:
    another Host is how a page on a rebinding domain would reach it."""

    code = ProblemCode.HOST_REFUSED
    status_code = 403


class CrossOriginRefused(AppError):
    """A service without API keys refuses a change requested by another site's page (its
    `Origin` header names another origin): with no key to ask for, it is the only thing
    that tells a visited web page from its user."""

    code = ProblemCode.CROSS_ORIGIN_REFUSED
    status_code = 403


class NotFound(AppError):
    """The resource does not exist."""

    code = ProblemCode.NOT_FOUND
    status_code = 404

    def __init__(self, kind: str, resource_id: str) -> None:
        self.kind = kind
        self.resource_id = resource_id
        super().__init__(f"{kind} {resource_id!r} does not exist")

    def extensions(self) -> dict[str, Any]:
        return {"resource": self.kind, "id": self.resource_id}


class Conflict(AppError):
    """The request conflicts with the current state of the resource."""

    code = ProblemCode.CONFLICT
    status_code = 409


class VersionConflict(Conflict):
    """The resource changed since the version you sent."""

    code = ProblemCode.VERSION_CONFLICT

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

    code = ProblemCode.INVALID_TRANSITION

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

    code = ProblemCode.APPROVAL_EXPIRED

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

    code = ProblemCode.IDEMPOTENCY_KEY_REUSED


class PayloadTooLarge(AppError):
    """The request body is larger than this server accepts."""

    code = ProblemCode.PAYLOAD_TOO_LARGE
    status_code = 413

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        super().__init__(f"request bodies are limited to {limit_bytes} bytes")

    def extensions(self) -> dict[str, Any]:
        return {"limit_bytes": self.limit_bytes}


@dataclass(frozen=True)
class FieldError:
    """One field at fault: where it is and what is wrong with it."""

    # Published (in a 422's `errors`) with the fields' docstrings, and nothing else. A plain
    # dict, not pydantic's ConfigDict: the core is imported by the command line's client
    # verbs, which load no pydantic.
    __pydantic_config__ = {"extra": "forbid", "use_attribute_docstrings": True}

    field: str
    """A body field by its dotted path (`limits.max_iterations`; `body`: the body as a
    whole); a parameter with its place first: `query.limit`, `header.Last-Event-ID`,
    `path.task_id`. A broken workflow rule names the node or edge: `nodes[review]`."""
    message: str
    """What is wrong with it, for people."""


class ValidationFailed(AppError):
    """The request is not valid."""

    code = ProblemCode.VALIDATION_ERROR
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

    code = ProblemCode.UNAVAILABLE
    status_code = 503
    retry_after_s: int = 5

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class QueueFull(Unavailable):
    """Too many writes are queued; retry after a moment."""

    code = ProblemCode.QUEUE_FULL

    def __init__(self, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        super().__init__()

    def extensions(self) -> dict[str, Any]:
        return {"retry_after_s": self.retry_after_s}


class TooManyStreams(Unavailable):
    """This process serves as many event streams as it may; retry after a moment."""

    code = ProblemCode.TOO_MANY_STREAMS

    def __init__(self, limit: int, retry_after_s: int) -> None:
        self.limit = limit
        self.retry_after_s = retry_after_s
        super().__init__(f"at most {limit} event streams are open at once on this process")

    def extensions(self) -> dict[str, Any]:
        return {"limit": self.limit, "retry_after_s": self.retry_after_s}


class ShuttingDown(Unavailable):
    """This process is shutting down; retry against another one or after the restart."""

    code = ProblemCode.SHUTTING_DOWN
