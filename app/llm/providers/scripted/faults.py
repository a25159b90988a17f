"""What a scripted turn's `fault` stands for, as a neutral ProviderError. The scripted
model speaks no vendor's API; its faults use one dialect, chosen to read like a real
service's so that a script exercises the same policy paths: 529 is an overload, and a 400
whose message states `exceed context limit: <input> + <max_tokens> > <window>` (or
`prompt is too long: <n> tokens > <window>`) is a context overflow with those counts."""

from __future__ import annotations

import re

from app.core.model_config import FaultKind, ScriptedFault
from app.llm.provider import ErrorClass, Overflow, ProviderError
from app.llm.providers import http_status

OVERLOADED = 529
_MAX_TOKENS_OVERFLOW = re.compile(r"exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")
_PROMPT_TOO_LONG = re.compile(
    r"prompt is too long(?::\s*(\d+)\s*tokens\s*>\s*(\d+))?", re.IGNORECASE
)


def fault_error(fault: ScriptedFault) -> ProviderError:
    """The error a fault stands for."""
    if fault.kind is not FaultKind.HTTP:  # the transport failed
        kind: ErrorClass = "timeout" if fault.kind is FaultKind.TIMEOUT else "connection"
        return ProviderError(kind, fault.message, status=fault.status, headers=fault.headers)
    assert fault.status is not None  # the schema requires it for an http fault
    overflow = _overflow(fault.message) if fault.status == 400 else None
    return http_status.http_error(
        fault.status, fault.message, fault.headers, overloaded=OVERLOADED, overflow=overflow
    )


def _overflow(message: str) -> Overflow | None:
    match = _MAX_TOKENS_OVERFLOW.search(message)
    if match is not None:
        input_tokens, max_tokens, window = (int(g) for g in match.groups())
        return Overflow(input_tokens, max_tokens, window)
    match = _PROMPT_TOO_LONG.search(message)
    if match is not None:
        prompt, maximum = match.groups()
        return Overflow(
            input_tokens=int(prompt) if prompt else None,
            context_window=int(maximum) if maximum else None,
        )
    return None
