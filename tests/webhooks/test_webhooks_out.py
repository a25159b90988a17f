"""Outbound webhooks through real HTTP, a real server and a real local receiver: subscribe,
read, change with `If-Match`, rotate the secret, delete; bad subscriptions are 422s naming
the field; a run that completes is delivered once, signed, and logged with its attempts;
a redeliver sends it again; the attempts are events of their own stream and counted in the
metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.runs.test_runs_api import make_agent, scripted, settle, start
from tests.support.api import assert_problem
from tests.support.cli import cli
from tests.support.receiver import Answer, Receiver, receiver
from tests.support.server import make_settings, running_server
from tests.support.sse import SseReader
from tests.triggers.test_hooks_api import ISSUE, body_of, deliver, webhook_trigger

pytestmark = pytest.mark.own_server  # settings of its own (`settings` below)

TIMEOUT_S = 20


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url, webhooks={"allowed_networks": ["127.0.0.0/8"], "poll_interval_s": 1.0}
    )


@pytest.fixture
async def hooks() -> AsyncIterator[Receiver]:
    async with receiver() as found:
        yield found


async def subscribe(
    client: httpx.AsyncClient, url: str, *types: str, **fields: Any
) -> dict[str, Any]:
    body = {"url": url, "event_types": list(types or ["agent_run.completed"]), **fields}
    response = await client.post("/v1/webhooks", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def completed_run(client: httpx.AsyncClient) -> dict[str, Any]:
    agent_id = await make_agent(client, scripted({"text": "done"}))
    run = await start(client, agent_id=agent_id)
    settled = await settle(client, run["id"])
    assert settled["status"] == "completed"
    return settled


async def log(client: httpx.AsyncClient, webhook_id: str, **params: Any) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/webhooks/{webhook_id}/deliveries", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def settled_log(
    client: httpx.AsyncClient, webhook_id: str, settled: int = 1
) -> list[dict[str, Any]]:
    """The delivery log once `settled` attempts have succeeded or dead-lettered (the server
    records an outcome just after its receiver answered), as the events stream tells."""
    outcomes = {"webhook.delivery.succeeded", "webhook.delivery.dead_lettered"}
    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream("GET", "/v1/webhooks/events", params={"last_event_id": 0}) as stream,
    ):
        reader, seen = SseReader(stream), 0
        while seen < settled:
            [event] = await reader.take(1)
            seen += event.event in outcomes and event.data["webhook_id"] == webhook_id
    return await log(client, webhook_id)


async def test_subscribe_read_change_rotate_and_delete_a_webhook(
    client: httpx.AsyncClient, hooks: Receiver
) -> None:
    created = await subscribe(
        client, hooks.hook(), "agent_run.completed", "agent_run.failed", description="ops"
    )
    assert created["secret"].startswith("whsec_") and created["version"] == 1
    assert created["event_types"] == ["agent_run.completed", "agent_run.failed"]
    path = f"/v1/webhooks/{created['id']}"
    got = await client.get(path)
    assert got.headers["etag"] == '"1"'
    assert got.json() == {k: v for k, v in created.items() if k != "secret"}
    listed = (await client.get("/v1/webhooks")).json()
    assert [w["id"] for w in listed["items"]] == [created["id"]] and "secret" not in listed[
        "items"
    ][0]
    assert (await client.get("/v1/webhooks", params={"enabled": False})).json()["items"] == []

    stale = await client.patch(path, json={"enabled": False}, headers={"If-Match": '"2"'})
    assert_problem(stale, 409, "version_conflict")
    changed = await client.patch(
        path,
        json={"enabled": False, "event_types": ["approval.requested"]},
        headers={"If-Match": '"1"'},
    )
    assert changed.status_code == 200, changed.text
    assert changed.headers["etag"] == '"2"'
    assert (changed.json()["enabled"], changed.json()["event_types"]) == (
        False,
        ["approval.requested"],
    )

    rotated = await client.post(f"{path}/rotate-secret", headers={"If-Match": '"2"'})
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["secret"] not in (created["secret"], None)
    assert rotated.json()["version"] == 3

    assert_problem(await client.delete(path, headers={"If-Match": '"1"'}), 409, "version_conflict")
    assert (await client.delete(path, headers={"If-Match": '"3"'})).status_code == 204
    assert_problem(await client.get(path), 404, "not_found")
    assert_problem(await client.get(f"{path}/deliveries"), 404, "not_found")
    assert_problem(await client.delete(path), 404, "not_found")


async def test_a_subscribe_with_an_idempotency_key_is_made_once(
    client: httpx.AsyncClient, hooks: Receiver
) -> None:
    body = {"url": hooks.hook(), "event_types": ["trigger.fired"]}
    key = {"Idempotency-Key": "hook-1"}
    first = await client.post("/v1/webhooks", json=body, headers=key)
    again = await client.post("/v1/webhooks", json=body, headers=key)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    other = await client.post("/v1/webhooks", json={**body, "description": "x"}, headers=key)
    assert_problem(other, 409, "idempotency_key_reused")
    assert len((await client.get("/v1/webhooks")).json()["items"]) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "http://169.254.169.254/latest/meta-data"}, "body.url"),  # cloud metadata
        ({"url": "http://10.1.2.3/hook"}, "body.url"),
        ({"url": "http://[::1]:8080/hook"}, "body.url"),  # loopback, but not 127.0.0.0/8
        ({"url": "http://[::ffff:10.0.0.1]/hook"}, "body.url"),
        ({"url": "ftp://example.com/hook"}, "url"),
        ({"url": "https://user:pw@example.com/hook"}, "url"),
        ({"url": "https:///hook"}, "url"),
        ({"event_types": ["agent_run.started"]}, "event_types.0"),
        ({"event_types": ["webhook.delivery.succeeded"]}, "event_types.0"),  # no loops
        ({"event_types": []}, "event_types"),
        ({"secret": "mine"}, "secret"),
    ],
)
async def test_a_bad_subscription_is_a_422_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    sent = {"url": "https://example.com/hook", "event_types": ["agent_run.completed"], **body}
    problem = assert_problem(await client.post("/v1/webhooks", json=sent), 422, "validation_error")
    assert [e["field"] for e in problem["errors"]] == [field]


async def test_a_change_is_checked_as_a_subscribe_is(
    client: httpx.AsyncClient, hooks: Receiver
) -> None:
    path = f"/v1/webhooks/{(await subscribe(client, hooks.hook()))['id']}"
    for body, field in [
        ({"url": "http://192.168.1.1/"}, "body.url"),
        ({"url": None}, "url"),
        ({}, "body"),
    ]:
        problem = assert_problem(await client.patch(path, json=body), 422, "validation_error")
        assert [e["field"] for e in problem["errors"]] == [field]
    moved = await client.patch(path, json={"url": hooks.hook("moved")})
    assert moved.status_code == 200 and moved.json()["url"].endswith("/moved")


async def test_with_the_default_policy_a_loopback_url_is_refused(
    database_url: str, clean_db: AsyncEngine, hooks: Receiver
) -> None:
    async with (
        running_server(make_settings(database_url)) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        refused = await client.post(
            "/v1/webhooks", json={"url": hooks.hook(), "event_types": ["trigger.fired"]}
        )
    problem = assert_problem(refused, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body.url"
    assert "refusing to connect to 127.0.0.1: loopback address" in problem["errors"][0]["message"]


async def test_a_completed_run_is_delivered_once_signed_logged_and_redelivered(
    client: httpx.AsyncClient, hooks: Receiver
) -> None:
    webhook = await subscribe(client, hooks.hook(), "agent_run.completed", "agent_run.failed")
    ignored = await subscribe(client, hooks.hook("other"), "approval.requested")
    run = await completed_run(client)

    [got] = await hooks.wait_for(1)
    [delivery] = await settled_log(client, webhook["id"])
    assert got.signed_by(webhook["secret"]) and not got.signed_by(ignored["secret"])
    assert got.delivery_id == delivery["id"]
    assert got.headers["loopwright-event"] == "agent_run.completed"
    payload = got.json
    assert payload == delivery["payload"]
    assert (payload["type"], payload["stream"]) == ("agent_run.completed", f"lane:{run['lane']}")
    assert payload["data"]["run_id"] == run["id"] and payload["data"]["lane"] == run["lane"]
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 1
    assert (delivery["last_status_code"], delivery["last_response"]) == (200, "ok")
    assert await log(client, ignored["id"]) == []

    path = f"/v1/webhooks/{webhook['id']}/deliveries/{delivery['id']}"
    detail = (await client.get(path)).json()
    [attempt] = detail["attempt_log"]
    assert (attempt["attempt"], attempt["succeeded"], attempt["status_code"]) == (1, True, 200)
    assert attempt["latency_ms"] >= 0

    again = await client.post(f"{path}/redeliver")
    assert again.status_code == 202, again.text
    assert (again.json()["status"], again.json()["attempts"]) == ("pending", 1)
    [_, second] = await hooks.wait_for(2)
    assert second.delivery_id == delivery["id"] and second.signed_by(webhook["secret"])
    [redelivered] = await settled_log(client, webhook["id"], settled=2)
    assert (redelivered["status"], redelivered["attempts"]) == ("succeeded", 2)
    assert await log(client, webhook["id"], status="dead_letter") == []

    async with (
        asyncio.timeout(TIMEOUT_S),
        client.stream("GET", "/v1/webhooks/events", params={"last_event_id": 0}) as stream,
    ):
        events = await SseReader(stream).take(3)
    assert [e.event for e in events] == [
        "webhook.delivery.succeeded",
        "webhook.delivery.redelivered",
        "webhook.delivery.succeeded",
    ]
    assert events[0].data["delivery_id"] == delivery["id"] and events[0].data["status_code"] == 200

    scrape = (await client.get("/metrics")).text
    counted = {
        s.labels["outcome"]: s.value
        for family in text_string_to_metric_families(scrape)
        for s in family.samples
        if s.name == "loopwright_webhook_deliveries_total"
    }
    assert counted == {"succeeded": 2, "failed": 0, "dead_lettered": 0}


async def test_a_pending_delivery_refuses_a_redeliver_and_unknowns_are_404s(
    client: httpx.AsyncClient, hooks: Receiver
) -> None:
    held = asyncio.Event()
    hooks.plan(Answer(hold=held))
    webhook = await subscribe(client, hooks.hook())
    await completed_run(client)
    [got] = await hooks.wait_for(1)  # the attempt is in flight, held by the receiver
    base = f"/v1/webhooks/{webhook['id']}/deliveries"
    [pending] = await log(client, webhook["id"], status="pending")
    refused = await client.post(f"{base}/{pending['id']}/redeliver")
    problem = assert_problem(refused, 409, "invalid_transition")
    assert (problem["current"], problem["allowed"]) == ("pending", ["dead_letter", "succeeded"])
    held.set()
    assert [d["status"] for d in await settled_log(client, webhook["id"])] == ["succeeded"]

    assert_problem(await client.get(f"{base}/whd_nope"), 404, "not_found")
    assert_problem(await client.post(f"{base}/whd_nope/redeliver"), 404, "not_found")
    assert_problem(
        await client.post(f"/v1/webhooks/wh_nope/deliveries/{got.delivery_id}/redeliver"),
        404,
        "not_found",
    )
    assert_problem(await client.post("/v1/webhooks/wh_nope/rotate-secret"), 404, "not_found")
    assert_problem(
        await client.patch("/v1/webhooks/wh_nope", json={"enabled": True}), 404, "not_found"
    )


async def test_webhooks_and_their_deliveries_from_the_command_line(
    client: httpx.AsyncClient, base_url: str, hooks: Receiver
) -> None:
    webhook = await subscribe(client, hooks.hook())
    await completed_run(client)
    [delivery] = await settled_log(client, webhook["id"])

    listed = await cli(base_url, "webhooks")
    assert listed.code == 0, listed
    assert listed.out.splitlines()[1].split() == [
        webhook["id"],
        "on",
        hooks.hook(),
        "agent_run.completed",
    ]
    log_lines = await cli(base_url, "webhooks", "deliveries", webhook["id"])
    assert log_lines.code == 0, log_lines
    assert log_lines.out.splitlines()[1].split()[:5] == [
        delivery["id"],
        "agent_run.completed",
        "succeeded",
        "1",
        "200",
    ]
    again = await cli(base_url, "webhooks", "redeliver", webhook["id"], delivery["id"])
    assert again.code == 0 and again.out.strip() == f"delivery {delivery['id']}: pending", again
    for args in (("deliveries",), ("redeliver", webhook["id"])):
        usage = await cli(base_url, "webhooks", *args)
        assert usage.code == 2 and "say which" in usage.err, usage


async def test_a_fired_trigger_is_delivered_with_its_fire(
    client: httpx.AsyncClient, hooks: Receiver
) -> None:
    webhook = await subscribe(client, hooks.hook(), "trigger.fired")
    trigger = await webhook_trigger(client)
    fired = await deliver(client, trigger, body_of(ISSUE))
    assert fired.status_code == 202, fired.text

    [got] = await hooks.wait_for(1)
    assert got.signed_by(webhook["secret"])
    assert (got.json["type"], got.json["stream"]) == ("trigger.fired", "triggers")
    assert got.json["data"]["trigger_id"] == trigger["id"]
    assert got.json["data"]["run_id"] == fired.json()["run_id"]
