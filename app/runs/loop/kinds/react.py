"""ReAct: the model reasons, calls tools, sees their results, until it answers in text.

terminators → context recovery → LLM call → llm_response boundary
→ tool batch → tool_result boundary → repeat
"""

from __future__ import annotations

from app.core.crashpoints import crash_point
from app.runs.loop import terminators
from app.runs.loop.kinds.protocol import LoopHost


class ReAct:
    """The default loop kind, and each step's segment in the others."""

    async def drive(self, host: LoopHost) -> None:
        while True:
            host.trace.turn(host.run.iteration)
            stop = terminators.first_stop(host.at_boundary())
            if stop is not None:
                await host.stop(stop)
                return
            await host.recover_context()
            response = await host.call_llm(with_tools=True)
            if await host.record_response(response):
                return
            crash_point("after_llm_response")
            cancel = terminators.cancelled(host.at_boundary())
            if cancel is not None:  # the response came after a cancel: its calls never run
                await host.stop(cancel)
                return
            if not await host.went_on(await host.run_batch(response.content)):
                return
            crash_point("after_tool_result")
