"""The Python SDK generated from openapi/openapi.json (`make sdk`) drives a run against a real
server: an agent, a run that asks a question, the answer, the run followed to the end and
its transcript, all through the SDK's typed models.

The SDK is generated once for this module, by the same script as `make sdk`, and imported
from where it was generated (it is not installed into this virtualenv); hence the imports
inside the tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.server import make_settings, running_server

GENERATE = Path(__file__).resolve().parents[2] / "sdk" / "generate.py"
API_KEY = "sdk-key"


@pytest.fixture(scope="module")
def generated_sdk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The SDK, generated without a warning, on sys.path for this module's tests."""
    output = tmp_path_factory.mktemp("sdk") / "loopwright-client"
    done = subprocess.run(
        [sys.executable, str(GENERATE), str(output)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"Generating {output}", done.stdout  # and nothing else
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(output))
        yield output


@pytest.fixture
async def keyed_url(
    generated_sdk: Path, database_url: str, clean_db: AsyncEngine
) -> AsyncIterator[str]:
    """A server that wants an API key, so that the SDK's authenticated client is tested."""
    settings = make_settings(database_url, auth={"api_keys": [API_KEY]})
    async with running_server(settings) as url:
        yield url


def event_types(stream: bytes) -> list[str]:
    """The `event:` names of a Server-Sent Events body, in order."""
    lines = stream.decode().splitlines()
    return [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]


async def test_the_sdk_drives_a_run_through_a_question_to_its_transcript(keyed_url: str) -> None:
    from loopwright_client import AuthenticatedClient
    from loopwright_client.api.agents import create_agent
    from loopwright_client.api.runs import (
        create_run,
        get_run,
        list_conversation_messages,
        respond_to_run,
        stream_run_events,
        wait_for_run,
    )
    from loopwright_client.models import (
        AgentCreate,
        AgentRead,
        Answer,
        RunCreate,
        RunRead,
        RunStatus,
        ScriptedModelConfig,
        ScriptedToolCall,
        ScriptedToolCallInput,
        StopReason,
        TextBlock,
        TextTurn,
        ToolCallsTurn,
        ToolResultBlock,
        ToolUseBlock,
        WaitReason,
    )

    question = ScriptedToolCallInput.from_dict({"question": "Which colour?"})
    model = ScriptedModelConfig(
        provider="scripted",
        name="s",
        script=[
            ToolCallsTurn(tool_calls=[ScriptedToolCall(name="ask_human", input_=question)]),
            TextTurn(text="Blue it is."),
        ],
    )
    async with AuthenticatedClient(base_url=keyed_url, token=API_KEY, timeout=30) as client:
        agent = await create_agent.asyncio(
            client=client, body=AgentCreate(name="asker", tools=["ask_human"], model=model)
        )
        assert isinstance(agent, AgentRead), agent
        run = await create_run.asyncio(
            client=client, body=RunCreate(agent_id=agent.id, input_="go")
        )
        assert isinstance(run, RunRead), run

        waiting = await wait_for_run.asyncio(run.id, client=client, timeout_s=20)
        assert isinstance(waiting, RunRead), waiting
        assert waiting.status == RunStatus.WAITING_ON_HUMAN
        assert waiting.waiting_for is not None
        assert waiting.waiting_for.reason == WaitReason.ASK_HUMAN
        assert waiting.waiting_for.question == "Which colour?"

        answered = await respond_to_run.asyncio(run.id, client=client, body=Answer(response="blue"))
        assert isinstance(answered, RunRead), answered
        # The run's stream ends once the run settles: the whole of it, in one call.
        followed = await stream_run_events.asyncio_detailed(run.id, client=client)
        assert followed.status_code == 200
        events = event_types(followed.content)
        assert events[0] == "agent_run.queued", events
        assert events.index("agent_run.waiting_on_human") < events.index(
            "agent_run.human_response"
        ), events
        assert events[-1] == "agent_run.completed", events

        done = await get_run.asyncio(run.id, client=client)
        assert isinstance(done, RunRead), done
        assert (done.status, done.stop_reason, done.result) == (
            RunStatus.COMPLETED,
            StopReason.END_TURN,
            "Blue it is.",
        )

        transcript = await list_conversation_messages.asyncio(done.conversation_id, client=client)
    assert isinstance(transcript, list), transcript
    # Compared by value: the generated enum's name changes as the document names its schemas.
    assert [message.role.value for message in transcript] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    (said,), (asked,), (result,), (answer,) = (message.content for message in transcript)
    assert isinstance(said, TextBlock) and said.text == "go"
    assert isinstance(asked, ToolUseBlock) and asked.name == "ask_human"
    assert asked.input_.to_dict() == {"question": "Which colour?"}
    assert isinstance(result, ToolResultBlock) and result.tool_use_id == asked.id
    assert result.content == "blue"
    assert isinstance(answer, TextBlock) and answer.text == "Blue it is."


async def test_a_refusal_comes_back_as_a_typed_problem(keyed_url: str) -> None:
    from loopwright_client import AuthenticatedClient, Client
    from loopwright_client.api.runs import get_run
    from loopwright_client.models import Problem

    async with AuthenticatedClient(base_url=keyed_url, token=API_KEY) as client:
        missing = await get_run.asyncio("run_0", client=client)
    assert isinstance(missing, Problem)
    assert (missing.status, missing.code) == (404, "not_found")

    async with Client(base_url=keyed_url) as anonymous:
        refused = await get_run.asyncio("run_0", client=anonymous)
    assert isinstance(refused, Problem)
    assert (refused.status, refused.code) == (401, "unauthorized")
