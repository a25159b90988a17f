"""A compaction's summary is an LLM call of its own: traced as a `chat` span in the turn
whose context it compacted, told apart from the turn's call by its purpose."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import RunStatus
from tests.runs.test_context_growth import SETTINGS, reader, reading, summarised
from tests.support.runs import Harness
from tests.support.traces import recorded_spans


async def test_a_compaction_summary_is_a_chat_span_of_its_turn(clean_db: AsyncEngine) -> None:
    with recorded_spans() as recorded:
        async with Harness.open(clean_db, compaction=SETTINGS) as h:
            agent, _ = await reader(h, reading(40), summarised, max_iterations=8)
            done = await h.finish(agent)
        spans = recorded.finished

    assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "max_iterations")
    assert done.iteration == 8
    chats = [s for s in spans if s.name.startswith("chat")]
    purposes = [(s.attributes or {})["loopwright.llm.purpose"] for s in chats]
    assert purposes.count("compaction_summary") == 1
    assert purposes.count("main_loop") == done.iteration
    [summary] = [s for s in chats if (s.attributes or {})["loopwright.llm.purpose"] != "main_loop"]
    assert summary.name == f"chat {SETTINGS.summary_model}"
    assert (summary.attributes or {})["gen_ai.provider.name"] == "scripted"
    [turn] = [
        s
        for s in spans
        if s.context and summary.parent and s.context.span_id == summary.parent.span_id
    ]
    assert turn.name == "turn"
    # The turn's own call follows the summary, under the same turn.
    [call] = [c for c in chats if c.parent == summary.parent and c is not summary]
    assert (summary.end_time or 0) <= (call.start_time or 0)
