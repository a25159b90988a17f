"""What a process imports at start, which is most of its start-up time (bench/startup.py):
the command line's client verbs load none of the server's stack, and the server loads
none of what only some processes need (each checked in a fresh interpreter)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

import pytest

# The server's stack: the client verbs speak HTTP and JSON only.
SERVER_STACK = {
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "asyncpg",
    "alembic",
    "pydantic",
    "pydantic_settings",
    "tiktoken",
    "anthropic",
    "openai",
    "pgserver",
    "yaml",  # read by `agents create` only
    "opentelemetry",
    "mcp",
}
# Loaded when needed: the Anthropic and OpenAI SDKs by the first run that calls them, the
# MCP SDK (and its httpx2) by the first run that starts an MCP server, the embedded
# server's wheel when no DATABASE_URL is set, Alembic when the database is behind the code,
# PyYAML by a workflow's export; schemathesis is a development tool.
NOT_AT_SERVER_START = {
    "anthropic",
    "openai",
    "mcp",
    "mcp_types",
    "pgserver",
    "alembic",
    "yaml",
    "schemathesis",
    "hypothesis",
}

REPORT = "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
# The OpenTelemetry SDK, exporters and instrumentation: loaded only by a process that traces
# (FastAPI itself imports the API package, `opentelemetry`, whatever we do).
TRACING = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation")


async def _loaded(code: str, report: str = REPORT, env: dict[str, str] | None = None) -> set[str]:
    """The top-level packages (or what `report` prints) a fresh interpreter has loaded after
    running `code`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        f"import json, sys\n{code}\n{report}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return set(json.loads(out.decode().splitlines()[-1]))


def _closed_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _cli(*argv: str) -> str:
    """Runs `loopwright ARGV` in-process; its exit status must be the one expected."""
    return (
        "from app.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit as exc:\n"
        "    status = exc.code\n"
    )


@pytest.mark.parametrize(
    ("argv", "status"),
    [(("--help",), 0), (("runs", "--url", "URL"), 7), (("tools", "--url", "URL"), 7)],
)
async def test_the_client_verbs_load_none_of_the_server_stack(
    argv: tuple[str, ...], status: int
) -> None:
    url = _closed_url()  # nothing listens: the verb runs to its "no server" exit
    argv = tuple(url if arg == "URL" else arg for arg in argv)
    loaded = await _loaded(f"{_cli(*argv)}assert status == {status}, status")
    assert loaded & SERVER_STACK == set()


async def test_the_server_loads_only_what_every_start_needs() -> None:
    loaded = await _loaded("import uvicorn\nfrom app.main import create_app\ncreate_app()")
    assert loaded & NOT_AT_SERVER_START == set()
    assert {"fastapi", "sqlalchemy", "tiktoken"} <= loaded  # the check sees the stack


@pytest.mark.parametrize("exporter", [None, "console"])
async def test_the_tracing_sdk_is_loaded_only_by_a_process_that_traces(
    exporter: str | None,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if exporter is not None:
        env["OTEL_TRACES_EXPORTER"] = exporter
    modules = "print(json.dumps(sorted(sys.modules)))"
    loaded = await _loaded("from app.main import create_app\ncreate_app()", modules, env)
    tracing = {name for name in loaded if name.startswith(TRACING)}
    if exporter is None:
        assert tracing == set()
    else:  # the check sees them when they are there
        assert {"opentelemetry.sdk.trace", "opentelemetry.instrumentation.fastapi"} <= tracing


@pytest.mark.parametrize("key", [None, "sk-test"])
async def test_a_process_with_anthropic_credentials_loads_the_sdk_on_a_thread_of_its_own(
    key: str | None,
) -> None:
    """Loaded by a run's first call, the SDK would hold the event loop for its ~2 s import;
    a process that can use it loads it in the background at start, one that cannot never."""
    settings = f"LLMSettings.model_validate({{'anthropic': {{'api_key': {key!r}}}}})"
    loaded = await _loaded(
        "from app.core.config import LLMSettings\n"
        "from app.llm.providers.registry import Providers\n"
        f"thread = Providers({settings}).warm_up()\n"
        "if thread is not None:\n"
        "    assert thread.name == 'provider-imports'\n"
        "    thread.join()\n"
    )
    assert ("anthropic" in loaded) is (key is not None)


@pytest.mark.parametrize(
    ("openai", "loads"),
    [
        ({}, False),
        ({"base_url": "http://127.0.0.1:11434/v1"}, True),  # a local server needs no key
        ({"api_key": "sk-test"}, True),
    ],
    ids=["nothing", "base-url", "key"],
)
async def test_a_process_that_can_reach_an_openai_server_loads_its_sdk_in_the_background(
    openai: dict[str, str], loads: bool
) -> None:
    settings = f"LLMSettings.model_validate({{'openai': {openai!r}}})"
    loaded = await _loaded(
        "from app.core.config import LLMSettings\n"
        "from app.llm.providers.registry import Providers\n"
        f"thread = Providers({settings}).warm_up()\n"
        "if thread is not None:\n"
        "    thread.join()\n"
    )
    assert ("openai" in loaded) is loads
    assert "anthropic" not in loaded  # no key for it
