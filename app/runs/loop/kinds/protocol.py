"""The protocol a loop kind implements, and the part of `RunLoop` it works with."""

from __future__ import annotations

from typing import Any, Protocol

from app.agents.schemas import AgentRead
from app.core.messages import Block, Message
from app.core.streams import StreamEvent
from app.llm.provider import LLMResponse
from app.runs.loop.model_calls import PLAIN, CallShape
from app.runs.loop.terminators import AtBoundary, Stop
from app.runs.loop.tool_batch import BatchEnd
from app.runs.schemas.runs import RunRead
from app.telemetry import spans


class LoopHost(Protocol):
    """What a loop kind may do to its run (`RunLoop` provides it). Every method that
    writes commits one boundary, fenced by the run's lease."""

    trace: spans.RunSpan
    agent: AgentRead

    @property
    def run(self) -> RunRead:
        """The run as the last commit returned it."""
        ...

    def at_boundary(self) -> AtBoundary:
        """What the terminators look at now."""
        ...

    async def stop(self, stop: Stop) -> None:
        """End the run as a terminator decided (or hand it back to the queue)."""
        ...

    async def recover_context(self) -> None:
        """Before an LLM call: compact the context when it needs it (and commit that)."""
        ...

    async def call_llm(self, *, with_tools: bool, shape: CallShape = PLAIN) -> LLMResponse:
        """The model's response to the context as it stands (`shape`: another model, tools
        of the loop kind's own, a forced tool)."""
        ...

    async def record_response(self, response: LLMResponse) -> bool:
        """Persist the assistant message; True when it was the final answer (settled)."""
        ...

    async def record_turn(
        self,
        response: LLMResponse,
        *,
        after: list[Message],
        run_values: dict[str, Any],
        events: list[StreamEvent],
    ) -> None:
        """Persist the assistant message and what answers it (`after`: a result for each
        of its tool calls), with the loop kind's state, without settling the run."""
        ...

    async def note(
        self, *, messages: list[Message], run_values: dict[str, Any], events: list[StreamEvent]
    ) -> None:
        """Commit the loop kind's own messages (an input for the model) and state."""
        ...

    async def run_batch(self, content: list[Block]) -> BatchEnd:
        """Run (through the ledger and approvals) the tool calls of a recorded response."""
        ...

    async def went_on(self, end: BatchEnd) -> bool:
        """After a tool batch: False when the run paused or is settled."""
        ...


class ExecutionLoop(Protocol):
    """One kind of agent loop (`execution_loop` on the agent). It starts where the run
    stands (a resumed run's open calls are answered already) and returns when the run
    settled, paused, or was handed back; a resumed run calls it again from its last
    boundary, so it keeps no state of its own outside what the host commits."""

    async def drive(self, host: LoopHost) -> None: ...
