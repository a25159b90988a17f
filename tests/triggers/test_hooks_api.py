"""`POST /v1/hooks/{trigger_id}` through real HTTP: a signed delivery starts its target
with the payload rendered in, a bad, stale, missing or replayed signature is refused, a
delivery id makes deliveries idempotent (also twenty at once), the payload schema and the
body limit apply, and the route needs no API key. On the shared server a test counts the
rows of its own trigger and agent, and reads its own trigger's events from the stream."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.signatures import signature_header
from app.runs.models import Run
from app.triggers.models import HookSignature, TriggerFire
from tests.support.api import assert_problem
from tests.support.factories import create_workflow, make_agent, unique
from tests.support.server import make_settings, running_server
from tests.support.sse import SseMessage, SseReader
from tests.triggers.test_triggers_api import create
from tests.workflows.test_workflow_observer import LINE


async def webhook_trigger(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    agent_id = (await make_agent(client))["id"]
    target = {
        "kind": "run",
        "agent_id": agent_id,
        "input": "New issue #{{ payload.issue.number }}: {{ payload.issue.title }}",
        "metadata": {"labels": "{{ payload.issue.labels }}", "sender": "{{ headers.x_sender }}"},
    }
    return await create(
        client, {"kind": "webhook", "name": unique("issues"), "target": target, **fields}
    )


def body_of(payload: Any) -> bytes:
    return json.dumps(payload).encode()


async def deliver(
    client: httpx.AsyncClient,
    trigger: dict[str, Any],
    body: bytes,
    *,
    secret: str | None = None,
    at: int | None = None,
    signature: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    stamp = int(time.time()) if at is None else at
    sent = {"Content-Type": "application/json", **(headers or {})}
    sent["Loopwright-Signature"] = signature or signature_header(
        secret or trigger["secret"], stamp, body
    )
    return await client.post(f"/v1/hooks/{trigger['id']}", content=body, headers=sent)


ISSUE = {"issue": {"number": 7, "title": "Crash on save", "labels": ["bug"]}}


async def count(db: AsyncEngine, model: Any, trigger: dict[str, Any]) -> int:
    """The trigger's rows of `model` (runs: of its target's agent, its own for each test)."""
    mine = (
        Run.agent_id == trigger["target"]["agent_id"]
        if model is Run
        else model.trigger_id == trigger["id"]
    )
    async with db.connect() as conn:
        stmt = select(func.count()).select_from(model).where(mine)
        return int((await conn.execute(stmt)).scalar_one())


async def trigger_events(
    client: httpx.AsyncClient, trigger_id: str, wanted: int
) -> tuple[list[SseMessage], list[SseMessage]]:
    """The triggers stream from its start until the trigger's `wanted`-th event: every
    event read, and the trigger's own."""
    seen: list[SseMessage] = []
    async with (
        asyncio.timeout(20),
        client.stream("GET", "/v1/triggers/events", headers={"Last-Event-ID": "0"}) as stream,
    ):
        reader = SseReader(stream)
        while len(own := [e for e in seen if e.data["trigger_id"] == trigger_id]) < wanted:
            seen += await reader.take(1)
    return seen, own


async def test_a_signed_delivery_starts_its_run(client: httpx.AsyncClient) -> None:
    trigger = await webhook_trigger(client)

    response = await deliver(client, trigger, body_of(ISSUE), headers={"X-Sender": "tracker"})

    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["status"] == "started" and answer["execution_id"] is None
    assert answer["error"] is None and answer["fire_id"].startswith("fire_")
    run = (await client.get(f"/v1/runs/{answer['run_id']}")).json()
    assert run["input"] == "New issue #7: Crash on save"
    marker = run["metadata"].pop("trigger")
    assert run["metadata"] == {"labels": ["bug"], "sender": "tracker"}
    assert marker["id"] == trigger["id"] and marker["kind"] == "webhook"
    assert marker["fire_id"] == answer["fire_id"] and marker["fire_key"].startswith("signature:")
    assert marker["fire_time"]

    fires = (await client.get(f"/v1/triggers/{trigger['id']}/fires")).json()
    (fire,) = fires["items"]
    assert fire["id"] == answer["fire_id"] and fire["run_id"] == run["id"]
    assert fire["status"] == "started" and fire["scheduled_for"] is None
    assert (await client.get(f"/v1/triggers/{trigger['id']}")).json()["last_fired_at"]

    seen, (event,) = await trigger_events(client, trigger["id"], 1)
    # Its id is its place in the stream: the events before it numbered from 1, no gap.
    assert [e.id for e in seen] == [str(n) for n in range(1, len(seen) + 1)]
    assert event.event == "trigger.fired" and event.id == seen[-1].id
    assert event.data["fire_id"] == answer["fire_id"] and event.data["run_id"] == run["id"]
    assert event.data["kind"] == "webhook" and event.data["trigger_id"] == trigger["id"]


async def test_bad_stale_and_missing_signatures_are_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    trigger = await webhook_trigger(client)
    body = body_of(ISSUE)

    wrong = await deliver(client, trigger, body, secret="whsec_not_it")
    assert_problem(wrong, 401, "signature_invalid")
    assert "WWW-Authenticate" not in wrong.headers
    stale = await deliver(client, trigger, body, at=int(time.time()) - 1_000)
    problem = assert_problem(stale, 401, "signature_expired")
    assert problem["tolerance_s"] == 300
    ahead = await deliver(client, trigger, body, at=int(time.time()) + 1_000)
    assert_problem(ahead, 401, "signature_expired")
    garbled = await deliver(client, trigger, body, signature="sha256=abc")
    assert_problem(garbled, 401, "signature_invalid")
    missing = await client.post(f"/v1/hooks/{trigger['id']}", content=body)
    assert_problem(missing, 401, "signature_missing")
    # Whatever the body: an unsigned request learns nothing about it.
    assert_problem(
        await client.post(f"/v1/hooks/{trigger['id']}", content=b"]["), 401, "signature_missing"
    )

    assert await count(db_engine, TriggerFire, trigger) == 0
    assert await count(db_engine, Run, trigger) == 0


async def test_a_replayed_signature_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    trigger = await webhook_trigger(client)
    body = body_of(ISSUE)
    header = signature_header(trigger["secret"], int(time.time()), body)

    first = await deliver(client, trigger, body, signature=header)
    again = await deliver(client, trigger, body, signature=header)
    disguised = await deliver(
        client, trigger, body, signature=header, headers={"Loopwright-Delivery": "d-9"}
    )

    assert first.status_code == 202
    assert_problem(again, 409, "signature_reused")
    assert_problem(disguised, 409, "signature_reused")
    assert await count(db_engine, Run, trigger) == 1
    assert await count(db_engine, HookSignature, trigger) == 1


async def test_a_delivery_id_answers_a_retry_with_the_first_answer(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    trigger = await webhook_trigger(client)
    body = body_of(ISSUE)

    first = await deliver(client, trigger, body, headers={"Loopwright-Delivery": "evt_1"})
    # The sender's retry, signed again a second later (a new signature, the same delivery).
    retry = await deliver(
        client, trigger, body, at=int(time.time()) + 1, headers={"Loopwright-Delivery": "evt_1"}
    )
    github = await deliver(
        client, trigger, body, at=int(time.time()) + 2, headers={"X-GitHub-Delivery": "evt_1"}
    )

    assert first.status_code == retry.status_code == github.status_code == 202
    assert retry.json() == first.json() == github.json()
    assert "Idempotent-Replayed" not in first.headers
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert await count(db_engine, Run, trigger) == 1
    fires = (await client.get(f"/v1/triggers/{trigger['id']}/fires")).json()["items"]
    assert [f["fire_key"] for f in fires] == ["delivery:evt_1"]
    second = await deliver(
        client, trigger, body, at=int(time.time()) + 3, headers={"Loopwright-Delivery": "evt_2"}
    )
    assert second.status_code == 202, second.text
    log = f"/v1/triggers/{trigger['id']}/fires"
    newest = (await client.get(log, params={"limit": 1})).json()
    assert [f["fire_key"] for f in newest["items"]] == ["delivery:evt_2"]
    older = (await client.get(log, params={"cursor": newest["next_cursor"]})).json()
    assert [f["fire_key"] for f in older["items"]] == ["delivery:evt_1"]
    assert older["next_cursor"] is None
    bad_id = await deliver(client, trigger, body, headers={"Loopwright-Delivery": "has space"})
    assert assert_problem(bad_id, 422, "validation_error")["errors"][0]["field"] == (
        "header.Loopwright-Delivery"
    )


async def test_twenty_identical_deliveries_at_once_make_one_run(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    trigger = await webhook_trigger(client)
    body = body_of(ISSUE)
    header = signature_header(trigger["secret"], int(time.time()), body)
    headers = {"Loopwright-Signature": header, "Loopwright-Delivery": "burst-1"}

    responses = await asyncio.gather(
        *(
            client.post(f"/v1/hooks/{trigger['id']}", content=body, headers=headers)
            for _ in range(20)
        )
    )

    assert {r.status_code for r in responses} == {202}, [r.text for r in responses]
    assert len({r.text for r in responses}) == 1
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 19
    assert await count(db_engine, Run, trigger) == 1
    assert await count(db_engine, TriggerFire, trigger) == 1


async def test_the_payload_must_match_its_schema(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    schema = {
        "type": "object",
        "required": ["issue"],
        "properties": {
            "issue": {
                "type": "object",
                "required": ["number", "title"],
                "properties": {"title": {"type": "string"}, "number": {"type": "integer"}},
            }
        },
    }
    trigger = await webhook_trigger(client, config={"payload_schema": schema})

    wrong = await deliver(client, trigger, body_of({"issue": {"title": 5}}))

    problem = assert_problem(wrong, 422, "validation_error")
    assert [e["field"] for e in problem["errors"]] == ["body.issue.number", "body.issue.title"]
    assert "5 is not of type 'string'" in problem["errors"][1]["message"]
    assert await count(db_engine, TriggerFire, trigger) == 0
    assert await count(db_engine, Run, trigger) == 0
    # the sender may fix it and sign again
    assert await count(db_engine, HookSignature, trigger) == 0
    assert (await deliver(client, trigger, body_of(ISSUE))).status_code == 202


async def test_the_body_must_be_a_json_object(client: httpx.AsyncClient) -> None:
    trigger = await webhook_trigger(client)
    for body, field in [
        (b"not json", "body"),
        (b"[1, 2]", "body"),
        (b'{"a": NaN}', "a"),
        (b'{"a": "\\u0000"}', "a"),
    ]:
        response = await deliver(client, trigger, body, headers={"Content-Type": "text/plain"})
        problem = assert_problem(response, 422, "validation_error")
        assert problem["errors"][0]["field"] == field, body


async def test_disabled_unknown_and_other_kinds(client: httpx.AsyncClient) -> None:
    trigger = await webhook_trigger(client)
    body = body_of(ISSUE)
    await client.post(f"/v1/triggers/{trigger['id']}/disable")
    assert_problem(await deliver(client, trigger, body), 409, "trigger_disabled")
    await client.post(f"/v1/triggers/{trigger['id']}/enable")
    assert (await deliver(client, trigger, body)).status_code == 202

    missing = await deliver(client, {**trigger, "id": "trg_missing"}, body)
    assert assert_problem(missing, 404, "not_found")["resource"] == "webhook trigger"
    agent_id = (await client.get(f"/v1/triggers/{trigger['id']}")).json()["target"]["agent_id"]
    timer = await create(
        client,
        {
            "kind": "schedule",
            "name": unique("timer"),
            "config": {"interval_s": 60},
            "target": {"kind": "run", "agent_id": agent_id, "input": "tick"},
        },
    )
    assert_problem(await deliver(client, timer, body, secret="x"), 404, "not_found")
    # Paused: on the shared server it would fire every minute after the test.
    assert (await client.post(f"/v1/triggers/{timer['id']}/disable")).status_code == 200


async def test_a_workflow_target_gets_its_context_and_a_failed_fire_is_answered(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **own_line())
    trigger = await create(
        client,
        {
            "kind": "webhook",
            "name": unique("deploys"),
            "target": {
                "kind": "workflow",
                "workflow_id": workflow["id"],
                "context": {"ticket": "{{ payload.issue.number }}"},
            },
        },
    )

    started = await deliver(client, trigger, body_of(ISSUE))

    assert started.status_code == 202 and started.json()["run_id"] is None
    execution_id = started.json()["execution_id"]
    execution = (await client.get(f"/v1/workflow-executions/{execution_id}")).json()
    assert execution["context"] == {"ticket": 7}

    deleted = await client.delete(f"/v1/workflows/{workflow['id']}")
    assert deleted.status_code in (204, 409), deleted.text
    if deleted.status_code == 409:  # its execution still runs: cancel it, then delete
        await client.post(f"/v1/workflow-executions/{execution_id}/cancel", json={})
        assert (await client.delete(f"/v1/workflows/{workflow['id']}")).status_code == 204
    failed = await deliver(client, trigger, body_of({"issue": {"number": 8}}))
    assert failed.status_code == 202
    assert failed.json()["status"] == "failed"
    assert "does not exist" in failed.json()["error"]
    _, (first, event) = await trigger_events(client, trigger["id"], 2)
    assert first.event == "trigger.fired"
    assert event.event == "trigger.fire_failed" and event.data["error"] == failed.json()["error"]


def own_line() -> dict[str, Any]:
    """`LINE` with a name and an assignee of its own (a name another test's agent could
    have would give it the tasks)."""
    definition = LINE.model_dump(mode="json")
    assignee = unique("ann")
    for node in definition["nodes"]:
        if node["type"] == "task":
            node["config"]["assigned_to"] = assignee
    return {**definition, "name": unique("line")}


async def test_the_route_needs_no_api_key_and_the_body_limit_applies(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(
        database_url, auth={"api_keys": ["k-one"]}, server={"max_body_bytes": 2048}
    )
    async with (
        running_server(settings) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as anonymous,
        httpx.AsyncClient(
            base_url=url, timeout=10, headers={"Authorization": "Bearer k-one"}
        ) as client,
    ):
        assert_problem(await anonymous.get("/v1/triggers"), 401, "unauthorized")
        trigger = await webhook_trigger(client)

        accepted = await deliver(anonymous, trigger, body_of(ISSUE))
        assert accepted.status_code == 202, accepted.text

        big = body_of({"issue": {"number": 1, "title": "x" * 4096}})
        assert_problem(await deliver(anonymous, trigger, big), 413, "payload_too_large")
