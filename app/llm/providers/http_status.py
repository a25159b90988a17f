"""What an HTTP error status says about a failed model call, for any vendor that speaks
HTTP: the neutral class of a status, the server's `x-should-retry` verdict, and the error
they make. A vendor's module starts from these and adds what only its API means (its own
overload status, its wording for a context overflow)."""

from __future__ import annotations

from app.llm.provider import ErrorClass, Overflow, ProviderError

CLASS_BY_STATUS: dict[int, ErrorClass] = {
    401: "auth",
    403: "forbidden",
    404: "not_found",
    408: "request_timeout",
    409: "conflict",  # lock contention on the service's side
    429: "rate_limited",
}


def class_of_status(status: int) -> ErrorClass:
    """The class of an error status: the ones named above; any other 5xx is the service's
    fault, any other 4xx (400, 402, 413, 422...) a request the service refuses."""
    named = CLASS_BY_STATUS.get(status)
    if named is not None:
        return named
    return "server_error" if status >= 500 else "bad_request"


def should_retry(headers: dict[str, str]) -> bool | None:
    """The server's own verdict, `x-should-retry: true|false`; None when it gave none."""
    directive = headers.get("x-should-retry", "").strip().lower()
    if directive == "true":
        return True
    if directive == "false":
        return False
    return None


def http_error(
    status: int,
    message: str,
    headers: dict[str, str],
    *,
    overloaded: int | None = None,
    overflow: Overflow | None = None,
) -> ProviderError:
    """An error status with its message: a context overflow when the vendor's module read
    one in it (`overflow`), an overload at the vendor's own status for one (`overloaded`),
    else the status's class."""
    lowered = {k.lower(): v for k, v in headers.items()}
    error_class: ErrorClass
    if overflow is not None:
        error_class = "context_overflow"
    elif status == overloaded:
        error_class = "overloaded"
    else:
        error_class = class_of_status(status)
    return ProviderError(
        error_class,
        message,
        status=status,
        headers=lowered,
        overflow=overflow,
        should_retry=should_retry(lowered),
    )
