"""A tool call whose arguments were not a JSON object (an OpenAI-compatible model's slip,
kept by its provider under `UNPARSED_ARGUMENTS`): the tool does not run, nobody is asked to
approve it, and the model reads an error quoting what it wrote, then carries on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import UNPARSED_ARGUMENTS
from app.core.states import RunStatus
from tests.support.runs import Harness, assert_valid_transcript, call, say, tool_results


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


async def test_a_call_with_unparsed_arguments_is_answered_with_an_error_not_run(
    h: Harness,
) -> None:
    # `guarded` is side-effecting: a call that could run would first wait for a person.
    broken = call("guarded", **{UNPARSED_ARGUMENTS: '{"to": "ops", '})
    agent = await h.agent(broken, call("guarded", to="ops"), say("Sent."), auto_approve=["guarded"])
    done = await h.finish(agent, "Tell ops.")

    assert (done.status, done.result) == (RunStatus.COMPLETED, "Sent.")
    assert h.tools.calls["guarded"] == 1  # the second, corrected call only
    messages = await h.messages(done.conversation_id)
    first, second = tool_results(messages)
    assert first.is_error
    assert first.content == (
        "Error: the arguments of this 'guarded' call are not a JSON object, so it did not "
        'run: \'{"to": "ops", \'. Call it again with its arguments as one JSON object.'
    )
    assert (second.is_error, second.content) == (False, "guarded ran")
    assert_valid_transcript(messages)


async def test_no_approval_is_asked_for_a_call_that_cannot_run(h: Harness) -> None:
    broken = call("guarded", **{UNPARSED_ARGUMENTS: "to=ops"})
    agent = await h.agent(broken, say("I could not."), auto_approve=[])
    done = await h.finish(agent)

    assert (done.status, done.result) == (RunStatus.COMPLETED, "I could not.")
    [result] = tool_results(await h.messages(done.conversation_id))
    assert result.is_error and "'to=ops'" in result.content
