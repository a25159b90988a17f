"""A CLI resource is one module with `register(commands)`: one defined in the test tree
(`lane_cli.py`) joins `loopwright` without an edit to `app/`, runs its verb against the
real server, and ends as every verb ends (the server options, one line and an exit status
for a server that is not there)."""

from __future__ import annotations

import re
import socket
import sys
from datetime import UTC, datetime, timedelta

import httpx

from tests.support.cli import cli
from tests.support.factories import make_agent, start_run, unique

LANE_CLI = (sys.executable, "-m", "tests.client.lane_cli")


async def test_its_verb_runs_against_the_server(client: httpx.AsyncClient, base_url: str) -> None:
    agent_id = (await make_agent(client))["id"]
    lane = unique("cli-lane")
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    delayed = await start_run(client, agent_id, lane=lane, not_before=later)
    behind = await start_run(client, agent_id, lane=lane)
    try:
        shown = await cli(base_url, "lane", lane, command=LANE_CLI)
    finally:  # the shared server's workers may take the lane again
        await client.post(f"/v1/runs/{delayed['id']}/cancel")
    assert shown.code == 0, shown
    title, header, *rows = shown.out.splitlines()
    assert title == f"lane {lane}: free, 2 queued"
    assert header.split() == ["RUN", "STATUS", "NOT", "BEFORE"]
    assert [row.split()[:2] for row in rows] == [
        [delayed["id"], "queued"],
        [behind["id"], "queued"],
    ]
    assert delayed["not_before"] in rows[0]


def _commands(help_text: str) -> list[str]:
    """The commands `--help` lists, in its order (a wrapped help line is indented deeper)."""
    return re.findall(r"^    (\S+)", help_text, re.MULTILINE)


async def test_help_lists_it_after_the_built_in_resources() -> None:
    built_in = await cli("http://127.0.0.1:1", "--help")
    extended = await cli("http://127.0.0.1:1", "--help", command=LANE_CLI)
    assert built_in.code == extended.code == 0, extended
    commands = _commands(built_in.out)
    assert commands[-3:] == ["tools", "migrate", "openapi"]  # the server's commands last
    assert _commands(extended.out) == [*commands[:-2], "lane", *commands[-2:]]


async def test_it_ends_as_every_verb_ends_without_a_server() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    unreached = await cli(closed, "lane", "anything", command=LANE_CLI)
    assert unreached.code == 7
    assert unreached.err.startswith(f"loopwright: cannot reach a Loopwright server at {closed}")
    usage = await cli(closed, "lane", command=LANE_CLI)
    assert usage.code == 2 and "the following arguments are required: name" in usage.err
