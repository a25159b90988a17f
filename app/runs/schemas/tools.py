"""What a tool is to a client: its name, what it does, its input, and whether a call may
be repeated safely and needs a person's approval."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class ToolIdempotency(StrEnum):
    """Whether a call may be repeated safely (then it is retried, and re-run on resume)."""

    ALWAYS = "always"
    NEVER = "never"  # side-effecting: a call cut short is never re-run without a person
    BY_INPUT = "by_input"  # decided per call (an HTTP GET is, a POST is not)


class ToolApproval(StrEnum):
    """Whether a call waits for a person's approval before it runs."""

    ALWAYS = "always"
    NEVER = "never"
    # A side-effecting or destructive call does, unless the agent auto-approves the tool.
    SIDE_EFFECTS = "side_effects"


class ToolRead(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any] = Field(
        description="The JSON Schema of the call's input, as the model is given it."
    )
    idempotency: ToolIdempotency
    approval: ToolApproval
    retried: bool = Field(description="A call that fails transiently is retried.")
    fallback: str | None = Field(description="The tool tried instead when this one fails.")
