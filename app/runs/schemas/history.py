"""A run's history as clients read it (`GET /v1/runs/{id}/history`), and a fork's request."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.core.bounds import POSITION_MAX
from app.core.states import RunStatus
from app.core.vocabulary import StepKind
from app.runs.schemas.runs import MessageRead, RunInput, Usage


class StartedCall(BaseModel):
    """A tool call started in this step, before it ran."""

    id: str
    tool: str
    idempotent: bool = Field(description="Whether it may run again after a crash.")


class AnsweredCall(BaseModel):
    """A tool call answered in this step."""

    id: str
    attempts: int
    is_error: bool
    result: str


class LLMCallRead(BaseModel):
    """The LLM call a step counts: the model that answered (a fallback one under its own
    name, of its own provider), its tokens, and its cost (null: the model has no price)."""

    model_config = ConfigDict(frozen=True)

    provider: str | None = Field(
        None, description="Who served the model (null: a step recorded before this was kept)."
    )
    model: str
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    cost_usd: float | None


class RunStepRead(BaseModel):
    """One step of a run: all that one boundary decided."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(description="Its number in the run's history (its stream's event id).")
    kind: StepKind
    status: RunStatus = Field(description="The run's status once the step was written.")
    at: datetime
    messages: list[MessageRead] = Field(description="Messages it appended to the conversation.")
    started: list[StartedCall]
    answered: list[AnsweredCall]
    forgotten: list[str] = Field(
        description="Calls a person let run again as if they had never started."
    )
    iteration: int | None = Field(description="The run's iteration, when this step moved it.")
    usage: Usage | None = Field(description="The run's usage so far, when this step moved it.")
    call: LLMCallRead | None = Field(
        None, description="The LLM call this step counts (a response, or an interrupted call)."
    )
    events: list[str] = Field(
        description="The types of its events, in order (`GET /v1/runs/{id}/events` has them whole)."
    )

    @property
    def id(self) -> str:
        """Where the next page starts (see `app/http/pagination.py`)."""
        return str(self.seq)


class RunFork(BaseModel):
    """Start a new run from the state a run was in after one of its steps."""

    model_config = ConfigDict(extra="forbid")

    from_seq: int = Field(
        ge=1,
        le=POSITION_MAX,
        description="The step to start from (`seq` in `GET /v1/runs/{id}/history`).",
    )
    input: RunInput | None = Field(
        None,
        description="A user message after that step's transcript: needed when the step ended "
        "with the model's final answer; refused when it left tool calls unanswered (they "
        "run again in the fork).",
    )
