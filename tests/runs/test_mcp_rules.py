"""The rules of agents' MCP servers that need no server: what a tool's annotations make of
its calls (failing closed), the names the model sees, the worker's policy (commands,
secrets, addresses), and the shape of a server's configuration."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from app.agents.schemas import AgentRead
from app.runs.schemas.mcp import McpServers, server_of
from app.runs.tools.base import ToolContext
from app.runs.tools.mcp.adapt import ListedTool, ServerTool, as_tool, exposed_name, listed
from app.runs.tools.mcp.errors import McpUnavailable
from app.runs.tools.mcp.policy import McpPolicy

# hints (read_only, idempotent, destructive) -> (may repeat, destructive, asks approval)
ANNOTATIONS = {
    (None, None, None): (False, True, True),  # no annotations: a destructive side effect
    (True, None, None): (True, False, False),  # read-only: nothing to approve
    (True, False, True): (True, False, False),  # read-only makes the other two moot
    (None, True, None): (True, True, True),  # idempotent, destructive by the spec's default
    (None, True, False): (True, False, False),  # idempotent and harmless: asks nobody
    (None, None, False): (False, False, True),  # a side effect, not destructive: still asks
    (False, False, False): (False, False, True),
}


@pytest.mark.parametrize(("hints", "expected"), ANNOTATIONS.items())
def test_annotations_decide_retries_resume_and_approval(
    hints: tuple[bool | None, bool | None, bool | None], expected: tuple[bool, bool, bool]
) -> None:
    read_only, idempotent, destructive = hints
    tool = ListedTool("s", "s__t", "t", "d", {"type": "object"}, read_only, idempotent, destructive)

    async def call(server: str, name: str, arguments: dict[str, Any]) -> str:
        return "ok"

    made = as_tool(tool, call, breaker_group="mcp:agent/s")
    may_repeat, is_destructive, asks = expected
    assert made.may_send_again({}) is may_repeat
    assert made.retries is may_repeat
    assert made.is_destructive({}) is is_destructive
    assert made.needs_approval({}, auto_approved=()) is asks
    assert made.needs_approval({}, auto_approved={"s__t"}) is False
    assert made.breaker_name({}) == "tool:mcp:agent/s"


async def test_a_tool_calls_its_server_by_its_own_name() -> None:
    seen: list[tuple[str, str, dict[str, Any]]] = []

    async def call(server: str, name: str, arguments: dict[str, Any]) -> str:
        seen.append((server, name, arguments))
        return "done"

    [tool] = listed("web", [ServerTool("search.query", "Find.", {"type": "object"})], None)
    made = as_tool(tool, call, breaker_group="g")
    assert made.name == "web__search_query"
    assert await made.handler(ToolContext("r", "c", "a", "v"), {"q": 1}) == "done"
    assert seen == [("web", "search.query", {"q": 1})]


def test_names_are_prefixed_made_safe_and_kept_apart() -> None:
    taken: set[str] = set()
    first = exposed_name("files", "read-file", taken)
    taken.add(first)
    second = exposed_name("files", "read.file", taken)  # the same once made safe
    long = exposed_name("files", "x" * 100, set())
    assert first == "files__read_file"
    assert second.startswith("files__read_file_") and second != first and len(second) <= 64
    assert len(long) == 64 and long.startswith("files__xxx")


def test_listing_keeps_only_the_tools_named_and_makes_schemas_objects() -> None:
    tools = [
        ServerTool("a", None, {"properties": {"x": {"type": "string"}}}),
        ServerTool("b", "B.", {"type": "array"}),
        ServerTool("c", "C.", None),
    ]
    found = {t.tool: t for t in listed("s", tools, ["a", "b"])}
    assert set(found) == {"a", "b"}
    assert found["a"].input_schema == {"properties": {"x": {"type": "string"}}, "type": "object"}
    assert found["a"].description == "a"  # no description: its name
    assert found["b"].input_schema == {"type": "object"}
    assert ListedTool.recorded(found["a"].record()) == found["a"]


POLICY = McpPolicy(
    stdio_commands=("npx",),
    secret_env=("TOKEN",),
    environ=lambda: {"TOKEN": "s3cret", "OTHER": "x"},
)


def test_references_are_resolved_only_from_the_variables_the_operator_lists() -> None:
    values = {"A": "Bearer ${TOKEN}", "B": "plain $TOKEN {TOKEN}"}
    assert POLICY.resolved("s", values) == {"A": "Bearer s3cret", "B": "plain $TOKEN {TOKEN}"}
    with pytest.raises(McpUnavailable, match="OTHER") as unlisted:
        POLICY.resolved("s", {"A": "${OTHER}"})
    assert not unlisted.value.retryable
    unset = McpPolicy(secret_env=("TOKEN",), environ=dict)
    with pytest.raises(McpUnavailable, match=r"\$\{TOKEN\} is not set"):
        unset.resolved("s", {"A": "${TOKEN}"})


def agent(servers: list[dict[str, Any]]) -> AgentRead:
    now = datetime.now(UTC)
    return AgentRead.model_validate(
        {
            "id": "agent_1",
            "version": 1,
            "created_at": now,
            "updated_at": now,
            "name": "a",
            "model": {"provider": "scripted", "name": "s", "script": [{"text": "x"}]},
            "mcp_servers": servers,
        }
    )


@pytest.mark.parametrize(
    ("server", "warning"),
    [
        ({"transport": "stdio", "command": "npx"}, None),
        ({"transport": "stdio", "command": "bash"}, "the command 'bash' is not one"),
        ({"transport": "stdio", "command": "npx", "env": {"K": "${OTHER}"}}, "${OTHER} is not"),
        ({"transport": "http", "url": "https://mcp.example.com/"}, None),
        ({"transport": "http", "url": "http://169.254.169.254/"}, "reaches a link-local address"),
        ({"transport": "http", "url": "http://localhost:8000/mcp"}, "reaches a loopback address"),
        ({"transport": "http", "url": "http://[::1]/mcp"}, "reaches a loopback address"),
    ],
)
def test_an_agent_is_warned_of_what_the_policy_refuses(
    server: dict[str, Any], warning: str | None
) -> None:
    warnings = POLICY.warnings(agent([{"name": "s", **server}]))
    if warning is None:
        assert warnings == []
    else:
        [found] = warnings
        assert found.startswith("MCP server 's': ") and warning in found


def test_any_command_when_the_operator_says_so() -> None:
    assert McpPolicy(stdio_commands=("*",)).command_allowed("/opt/anything")
    assert not McpPolicy().command_allowed("npx")  # closed by default
    assert McpPolicy(allow_private=True).url_refusal("http://127.0.0.1/") is None
    assert McpPolicy(allowed_networks=("10.0.0.0/8",)).url_refusal("http://10.1.2.3/") is None


SERVERS: TypeAdapter[Any] = TypeAdapter(McpServers)


@pytest.mark.parametrize(
    "servers",
    [
        [{"name": "a__b", "transport": "stdio", "command": "x"}],  # no double underscore
        [{"name": "a_", "transport": "stdio", "command": "x"}],
        [{"name": "1a", "transport": "stdio", "command": "x"}],
        [{"name": "a" * 25, "transport": "stdio", "command": "x"}],
        [{"name": "a", "transport": "stdio", "command": ""}],
        [{"name": "a", "transport": "stdio", "command": "x\ny"}],
        [{"name": "a", "transport": "http", "url": "file:///etc/passwd"}],
        [{"name": "a", "transport": "http", "url": "https://user:pw@x.example/"}],
        [{"name": "a", "transport": "http", "url": "https://x.example/", "headers": {"A B": "v"}}],
        [{"name": "a", "transport": "http", "url": "https://x.example/", "headers": {"A": "\n"}}],
        [{"name": "a", "transport": "stdio", "command": "x", "url": "https://x.example/"}],
        [{"name": "a", "transport": "stdio", "command": "x", "timeout_s": 0}],
        [{"name": "a", "transport": "stdio", "command": "x"}] * 2,
    ],
)
def test_a_configuration_the_schema_refuses(servers: list[dict[str, Any]]) -> None:
    with pytest.raises(ValidationError):
        SERVERS.validate_python(servers)


def test_a_tool_belongs_to_a_server_by_its_prefix() -> None:
    assert server_of("files__read", {"files"}) == "files"
    assert server_of("files__", {"files"}) is None
    assert server_of("other__read", {"files"}) is None
    assert server_of("read", {"files"}) is None


def test_a_result_is_its_text_with_other_content_summarised() -> None:
    import mcp_types

    from app.runs.tools.mcp.connection import MAX_RESULT_CHARS, _text

    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="first"),
            mcp_types.ImageContent(type="image", data="QUJD", mime_type="image/png"),
            mcp_types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///b.txt", text="inside"),
            ),
        ]
    )
    assert _text(result).splitlines() == [
        "first",
        "[image: image/png, 3 bytes, not shown]",
        "[resource link: file:///a.txt]",
        "[resource file:///b.txt]",
        "inside",
    ]
    structured = mcp_types.CallToolResult(content=[], structured_content={"n": 1})
    assert _text(structured) == '{"n": 1}'
    long = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="x" * 200_000)]
    )
    assert len(_text(long)) < MAX_RESULT_CHARS + 100 and _text(long).endswith("characters]")
