"""Agents and runs through real HTTP: a scripted agent runs to completion with its
transcript, lanes queue in order, policies and validation answer as documented, and the
run's event stream replays exactly what a disconnected client missed."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support import factories
from tests.support.api import assert_problem
from tests.support.factories import agent_body, settle, start_run, unique
from tests.support.server import make_settings, running_server
from tests.support.sse import SseMessage, SseReader, messages


async def _agent(
    client: httpx.AsyncClient, *turns: dict[str, Any], tools: list[str] | None = None
) -> str:
    """A scripted agent with the `echo` tool (or `tools`): its id."""
    agent = await factories.make_agent(client, *turns, tools=tools or ["echo"])
    return str(agent["id"])


# Still imported from here by other test modules (tests/support/factories.py has the
# factories now): an agent body with the `echo` tool, made with a unique name, its id, and
# a run started with the agent among the body's fields.
def scripted(*turns: dict[str, Any], tools: list[str] | None = None) -> dict[str, Any]:
    return agent_body(*turns, tools=tools or ["echo"])


async def make_agent(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    return str((await factories.make_agent(client, **body))["id"])


start = start_run
__all__ = ["make_agent", "scripted", "settle", "start"]


async def test_a_scripted_run_completes_with_its_transcript(client: httpx.AsyncClient) -> None:
    agent_id = await _agent(
        client, {"tool_calls": [{"name": "echo", "input": {"x": 1}}]}, {"text": "done"}
    )
    run = await start_run(client, agent_id=agent_id, input="please echo")
    assert run["status"] == "queued" and run["lane"] == f"conversation:{run['conversation_id']}"
    final = await settle(client, run["id"])
    assert final["status"] == "completed" and final["result"] == "done"
    assert final["iteration"] == 2
    messages = (await client.get(f"/v1/conversations/{run['conversation_id']}/messages")).json()
    assert [(m["role"], m["content"][0]["type"]) for m in messages] == [
        ("user", "text"),
        ("assistant", "tool_use"),
        ("user", "tool_result"),
        ("assistant", "text"),
    ]
    assert messages[2]["content"][0]["content"] == '{"x": 1}'
    listed = (await client.get("/v1/runs", params={"agent_id": agent_id})).json()
    assert [r["id"] for r in listed["items"]] == [run["id"]]


async def test_a_lane_shows_its_holder_and_queue_in_order(client: httpx.AsyncClient) -> None:
    agent_id = await _agent(
        client,
        {"tool_calls": [{"name": "ask_human", "input": {"question": "ok?"}}]},
        {"text": "thanks"},
        tools=["ask_human"],
    )
    team = unique("team:a")
    first = await start_run(client, agent_id=agent_id, lane=team)
    assert (await settle(client, first["id"]))["status"] == "waiting_on_human"
    second = await start_run(client, agent_id=agent_id, lane=team)
    third = await start_run(client, agent_id=agent_id, lane=team)
    lane = (await client.get(f"/v1/lanes/{team}")).json()
    assert lane["active"]["id"] == first["id"]
    assert [r["id"] for r in lane["queued"]] == [second["id"], third["id"]]

    rejected = await client.post(
        "/v1/runs",
        json={"agent_id": agent_id, "input": "x", "lane": team, "multitask": "reject"},
    )
    assert assert_problem(rejected, 409, "lane_busy")["holder"] == first["id"]

    cancelled = await client.post(f"/v1/runs/{third['id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    answered = await client.post(f"/v1/runs/{first['id']}/human-response", json={"response": "yes"})
    assert answered.json()["status"] == "queued"
    assert (await settle(client, first["id"]))["result"] == "thanks"
    second_done = await settle(client, second["id"])
    assert second_done["status"] == "waiting_on_human"  # it asks too, after the first ended
    assert (
        second_done["started_at"]
        > (await client.get(f"/v1/runs/{first['id']}")).json()["finished_at"]
    )


async def test_run_creation_is_validated_and_idempotent(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/runs", json={"agent_id": "agent_nope", "input": "x"})
    assert assert_problem(missing, 404, "not_found")["resource"] == "agent"
    bad_agent = await client.post(
        "/v1/agents", json={"name": "x", "model": {"provider": "scripted", "name": "s"}}
    )
    assert assert_problem(bad_agent, 422, "validation_error")["errors"][0]["field"] == "model"
    agent_id = await _agent(client, {"text": "hi"})
    empty = await client.post("/v1/runs", json={"agent_id": agent_id, "input": ""})
    assert assert_problem(empty, 422, "validation_error")["errors"][0]["field"] == "input"
    policy = await client.post(
        "/v1/runs", json={"agent_id": agent_id, "input": "x", "multitask": "whatever"}
    )
    assert assert_problem(policy, 422, "validation_error")["errors"][0]["field"] == "multitask"

    body = {"agent_id": agent_id, "input": "once"}
    key = {"Idempotency-Key": unique("r")}
    first = await client.post("/v1/runs", json=body, headers=key)
    again = await client.post("/v1/runs", json=body, headers=key)
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    other = await client.post("/v1/runs", json={**body, "input": "twice"}, headers=key)
    assert_problem(other, 409, "idempotency_key_reused")
    assert_problem(await client.get("/v1/runs/run_nope"), 404, "not_found")
    done = await settle(client, first.json()["id"])
    assert_problem(await client.post(f"/v1/runs/{done['id']}/cancel"), 409, "invalid_transition")


async def test_a_run_that_cannot_be_resumed_says_what_it_is(client: httpx.AsyncClient) -> None:
    agent_id = await _agent(client, {"text": "done"})
    run = await start_run(client, agent_id=agent_id)
    assert (await settle(client, run["id"]))["status"] == "completed"
    refused = await client.post(f"/v1/runs/{run['id']}/resume")
    problem = assert_problem(refused, 409, "resume_unavailable")
    assert problem["status"] == 409  # the HTTP status; the run's is `run_status`
    assert problem["run_status"] == "completed" and problem["resume_available"] is False


async def test_run_creates_racing_with_one_key_make_one_run(client: httpx.AsyncClient) -> None:
    agent_id = await _agent(client, {"text": "hi"})
    lane, key = unique("race"), unique("race")
    body = {"agent_id": agent_id, "input": "once", "lane": lane}
    answers = await asyncio.gather(
        *(client.post("/v1/runs", json=body, headers={"Idempotency-Key": key}) for _ in range(8))
    )
    assert [r.status_code for r in answers] == [202] * 8, [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert sum("idempotent-replayed" not in r.headers for r in answers) == 1
    listed = await client.get("/v1/runs", params={"lane": lane})
    assert len(listed.json()["items"]) == 1


async def test_run_events_replay_exactly_what_a_disconnected_client_missed(
    client: httpx.AsyncClient,
) -> None:
    turns = [
        {"tool_calls": [{"name": "echo", "input": {"i": i}}], "latency_ms": 30} for i in range(6)
    ]
    agent_id = await _agent(client, *turns, {"text": "end"})
    run = await start_run(client, agent_id=agent_id)
    path = f"/v1/runs/{run['id']}/events"
    async with asyncio.timeout(30):
        async with client.stream("GET", path) as first:
            seen = await SseReader(first).take(
                5, persisted_only=True
            )  # then drop the connection mid-run
        last = seen[-1].id
        assert last is not None
        await settle(client, run["id"])
        async with client.stream("GET", path, headers={"Last-Event-ID": last}) as resumed:
            reader = SseReader(resumed)
            rest: list[SseMessage] = []
            while not rest or rest[-1].event != "agent_run.completed":
                rest += await reader.take(1, persisted_only=True)
        async with client.stream("GET", path, params={"last_event_id": 0}) as everything:
            full = await SseReader(everything).take(len(seen) + len(rest), persisted_only=True)
    # No gap, no duplicate: the reconnect went on where the client was cut off, inside a
    # step if need be (`<step>.<n>`; a step's last event is `<step>`).
    got = [*seen, *rest]
    assert [(m.id, m.event, m.data) for m in full] == [(m.id, m.event, m.data) for m in got]
    keys = [
        (int(m.id.split(".")[0]), int(m.id.split(".")[1]) if "." in m.id else 2**31)
        for m in got
        if m.id
    ]
    assert keys == sorted(set(keys)) and len(keys) == len(got)
    assert [k[0] for k in keys if k[1] == 2**31] == list(range(1, keys[-1][0] + 1))


async def test_no_worker_identity_reaches_clients(client: httpx.AsyncClient) -> None:
    """A worker's name carries its host and pid: logs and metrics keep it, clients never
    see it, in a run or in its events."""
    agent_id = await _agent(client, {"text": "done"})
    run = await start_run(client, agent_id=agent_id, input="hello")
    final = await settle(client, run["id"])
    assert "lease_owner" not in final
    listed = (await client.get("/v1/runs", params={"agent_id": agent_id})).json()["items"]
    assert listed and all("lease_owner" not in item for item in listed)
    async with client.stream(
        "GET", f"/v1/runs/{run['id']}/events", headers={"Last-Event-ID": "0"}
    ) as stream:
        body = ""
        async for chunk in stream.aiter_text():
            body += chunk
            if "agent_run.completed" in body:
                break
    assert "agent_run.started" in body
    # A worker's name is `host:pid:suffix` (this process's, the app running in it); the
    # host alone may be a short word that a random id happens to contain.
    assert '"worker"' not in body
    assert f"{socket.gethostname()}:{os.getpid()}" not in body


async def test_a_cancel_during_a_long_model_call_ends_the_run_at_once(
    client: httpx.AsyncClient,
) -> None:
    """A 20 s model turn: each cancel settles its run long before the turn would end.
    (`bench/cancel_latency.py` measures the latency's distribution.)"""
    agent_id = await _agent(client, {"text": "too late", "latency_ms": 20_000})
    waited: list[float] = []
    for _ in range(5):
        run = await start_run(client, agent_id=agent_id)
        async with client.stream("GET", f"/v1/runs/{run['id']}/events") as events:
            reader = SseReader(events)
            while (await reader.take(1, persisted_only=True))[0].event != "agent_run.started":
                pass
            # The model call begins as the run starts; a cancel now lands during it.
            began = asyncio.get_running_loop().time()
            cancelled = await client.post(f"/v1/runs/{run['id']}/cancel")
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["cancel_requested"] is True
            final = await settle(client, run["id"])
            waited.append(asyncio.get_running_loop().time() - began)
        assert (final["status"], final["stop_reason"]) == ("cancelled", "cancelled")
        assert final["result"] is None and final["iteration"] == 0
    assert max(waited) < 5, waited


async def test_a_runs_stream_ends_after_the_event_that_settled_it(
    client: httpx.AsyncClient,
) -> None:
    agent_id = await _agent(client, {"text": "done"})
    run = await start_run(client, agent_id=agent_id)
    async with asyncio.timeout(10), client.stream("GET", f"/v1/runs/{run['id']}/events") as sse:
        received = [m async for m in messages(sse) if m.id is not None]  # ends by itself
    assert received[-1].event == "agent_run.completed"
    steps = [int(m.id.split(".")[0]) for m in received if m.id]
    assert steps == sorted(steps)


async def test_a_stream_kept_open_sees_a_settled_run_go_again(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, llm={"anthropic": {"api_key": None}})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        keyless = {"provider": "anthropic", "name": "claude-x"}
        agent = await factories.make_agent(http, model=keyless)
        run = await start_run(http, agent_id=agent["id"])  # fails at once: no key
        path = f"/v1/runs/{run['id']}"
        async with (
            asyncio.timeout(20),
            http.stream("GET", f"{path}/events", params={"keep_open": "true"}) as sse,
        ):
            reader = SseReader(sse)
            failures = 0
            while failures < 2:
                message = (await reader.take(1, persisted_only=True))[0]
                if message.event == "agent_run.failed":
                    failures += 1
                    if failures == 1:  # a person retries it; the open stream shows the rest
                        assert (await http.post(f"{path}/retry")).status_code == 200
        final = (await http.get(path)).json()
    assert (final["status"], len(final["error_log"])) == ("failed", 2)


async def test_runs_are_listed_newest_first_when_asked_and_paged_that_way(
    client: httpx.AsyncClient,
) -> None:
    agent_id = await _agent(client, {"text": "done"})
    ids = [(await start_run(client, agent_id=agent_id))["id"] for _ in range(3)]
    mine = {"agent_id": agent_id}
    first = (await client.get("/v1/runs", params={**mine, "order": "newest", "limit": 2})).json()
    assert [r["id"] for r in first["items"]] == ids[::-1][:2]
    params = {**mine, "order": "newest", "limit": 2, "cursor": first["next_cursor"]}
    rest = (await client.get("/v1/runs", params=params)).json()
    assert ([r["id"] for r in rest["items"]], rest["next_cursor"]) == ([ids[0]], None)
    oldest = (await client.get("/v1/runs", params={**mine, "limit": 2})).json()
    assert [r["id"] for r in oldest["items"]] == ids[:2]


async def test_a_reconnect_to_a_settled_runs_stream_ends_too(client: httpx.AsyncClient) -> None:
    agent_id = await _agent(client, {"text": "done"})
    run = await start_run(client, agent_id=agent_id)
    await settle(client, run["id"])
    path = f"/v1/runs/{run['id']}/events"
    async with asyncio.timeout(10), client.stream("GET", path) as sse:
        replayed = [m async for m in messages(sse) if m.id is not None]
    last = replayed[-1].id
    headers = {"Last-Event-ID": str(last)}
    async with asyncio.timeout(10), client.stream("GET", path, headers=headers) as sse:
        assert [m async for m in messages(sse) if m.id is not None] == []  # and it ended
