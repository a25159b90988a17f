"""`/v1/triggers` through real HTTP: create (the secret once), list, get, patch with
If-Match, delete, enable and disable (a schedule armed and disarmed), a schedule's next
fire times, rotate a secret, idempotent creates, and every refusal at save naming its
field.

The server is shared: a test lists the triggers it made (from `since`, a cursor before
them), and pauses the schedules it armed (`pause_schedules`) once they have been checked."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from app.core.ids import id_floor
from app.http.pagination import encode_cursor
from app.triggers.engine.schedule_times import next_fires
from app.triggers.schemas import ScheduleConfig
from tests.support.api import assert_problem
from tests.support.factories import make_agent, unique


async def agent(client: httpx.AsyncClient) -> str:
    return str((await make_agent(client))["id"])


def since(moment: datetime) -> str:
    """A list cursor just before every trigger made from `moment` on (ids sort by their
    creation time): the triggers a test made, when `moment` is before its first."""
    return encode_cursor(id_floor("trg", moment))


async def made_since(
    client: httpx.AsyncClient, moment: datetime, **params: Any
) -> list[dict[str, Any]]:
    """The triggers made from `moment` on (every page), with the list's filters."""
    found: list[dict[str, Any]] = []
    cursor: str | None = since(moment)
    while cursor is not None:
        page = (await client.get("/v1/triggers", params={**params, "cursor": cursor})).json()
        found += page["items"]
        cursor = page["next_cursor"]
    return found


async def pause_schedules(client: httpx.AsyncClient, moment: datetime) -> None:
    """Disarm the schedules made from `moment` on: the shared server would fire them
    after the test (a run of its agent, an event in the triggers stream)."""
    for trigger in await made_since(client, moment, kind="schedule", enabled="true"):
        paused = await client.post(f"/v1/triggers/{trigger['id']}/disable")
        assert paused.status_code == 200, paused.text


def webhook(agent_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "webhook",
        "name": unique("issues"),
        "target": {"kind": "run", "agent_id": agent_id, "input": "New: {{ payload.title }}"},
        **fields,
    }


def schedule(agent_id: str, **config: Any) -> dict[str, Any]:
    return {
        "kind": "schedule",
        "name": unique("nightly"),
        "config": {"cron": "0 3 * * *", "timezone": "Europe/Berlin", **config},
        "target": {"kind": "run", "agent_id": agent_id, "input": "Report for {{ fire_time }}"},
    }


async def create(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/triggers", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    assert response.headers["ETag"] == f'"{created["version"]}"'
    return created


async def test_a_webhook_trigger_shows_its_secret_once(client: httpx.AsyncClient) -> None:
    agent_id = await agent(client)
    created = await create(client, webhook(agent_id, description="from the tracker"))
    assert created["secret"].startswith("whsec_") and created["kind"] == "webhook"
    assert created["config"] == {"payload_schema": None}
    assert created["enabled"] and created["next_fire_at"] is None

    got = await client.get(f"/v1/triggers/{created['id']}")
    assert got.status_code == 200 and got.json()["secret"] is None
    assert got.json() == {**created, "secret": None}

    rotated = await client.post(f"/v1/triggers/{created['id']}/rotate-secret")
    assert rotated.status_code == 200
    assert rotated.json()["secret"] not in (None, created["secret"])
    assert rotated.json()["version"] == 2


async def test_list_filters_and_pages(client: httpx.AsyncClient) -> None:
    agent_id = await agent(client)
    start = datetime.now(UTC)
    first = await create(client, webhook(agent_id))
    second = await create(client, schedule(agent_id))
    third = await create(client, webhook(agent_id, enabled=False))
    mine = since(start)  # the list from just before this test's triggers

    page = (await client.get("/v1/triggers", params={"limit": 2, "cursor": mine})).json()
    assert [t["id"] for t in page["items"]] == [first["id"], second["id"]]
    rest = (await client.get("/v1/triggers", params={"cursor": page["next_cursor"]})).json()
    assert [t["id"] for t in rest["items"]] == [third["id"]] and rest["next_cursor"] is None
    webhooks = (await client.get("/v1/triggers", params={"kind": "webhook", "cursor": mine})).json()
    assert [t["id"] for t in webhooks["items"]] == [first["id"], third["id"]]
    off = (await client.get("/v1/triggers", params={"enabled": "false", "cursor": mine})).json()
    assert [t["id"] for t in off["items"]] == [third["id"]]
    assert all(t["secret"] is None for t in webhooks["items"])
    await pause_schedules(client, start)


async def test_patch_with_if_match(client: httpx.AsyncClient) -> None:
    agent_id = await agent(client)
    created = await create(client, webhook(agent_id))
    url = f"/v1/triggers/{created['id']}"

    renamed = await client.patch(url, json={"name": "renamed"}, headers={"If-Match": '"1"'})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "renamed" and renamed.headers["ETag"] == '"2"'

    stale = await client.patch(url, json={"description": "x"}, headers={"If-Match": '"1"'})
    problem = assert_problem(stale, 409, "version_conflict")
    assert problem["current_version"] == 2

    target = {"kind": "workflow", "workflow_id": "wf_missing", "context": {}}
    assert_problem(await client.patch(url, json={"target": target}), 404, "not_found")
    retargeted = {"kind": "run", "agent_id": agent_id, "input": "{{ payload }}", "delay_s": 60}
    moved = await client.patch(url, json={"target": retargeted})
    assert moved.status_code == 200, moved.text
    assert moved.json()["target"]["delay_s"] == 60 and moved.json()["version"] == 3
    schema = {"type": "object", "required": ["title"]}
    changed = await client.patch(url, json={"config": {"payload_schema": schema}})
    assert changed.json()["config"] == {"payload_schema": schema}
    assert changed.json()["next_fire_at"] is None  # a webhook is never armed
    wrong_kind = await client.patch(url, json={"config": {"interval_s": 60}})
    problem = assert_problem(wrong_kind, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body.config.interval_s"
    assert_problem(await client.patch(url, json={}), 422, "validation_error")
    assert_problem(await client.patch(url, json={"name": None}), 422, "validation_error")
    assert_problem(
        await client.patch("/v1/triggers/trg_missing", json={"name": "x"}), 404, "not_found"
    )


async def test_delete(client: httpx.AsyncClient) -> None:
    created = await create(client, webhook(await agent(client)))
    url = f"/v1/triggers/{created['id']}"
    assert_problem(await client.delete(url, headers={"If-Match": '"7"'}), 409, "version_conflict")
    assert (await client.delete(url, headers={"If-Match": '"1"'})).status_code == 204
    assert_problem(await client.get(url), 404, "not_found")
    assert_problem(await client.get(f"{url}/fires"), 404, "not_found")
    assert_problem(await client.delete(url), 404, "not_found")


async def test_enable_and_disable_arm_and_disarm_a_schedule(client: httpx.AsyncClient) -> None:
    created = await create(client, schedule(await agent(client)))
    url = f"/v1/triggers/{created['id']}"
    armed = datetime.fromisoformat(created["next_fire_at"])
    assert armed.astimezone().minute == 0 and armed > datetime.now(armed.tzinfo)

    disabled = (await client.post(f"{url}/disable")).json()
    assert disabled["enabled"] is False and disabled["next_fire_at"] is None
    again = (await client.post(f"{url}/disable")).json()
    assert again["version"] == disabled["version"]  # already so: unchanged

    enabled = await client.post(f"{url}/enable", headers={"If-Match": f'"{again["version"]}"'})
    assert enabled.status_code == 200
    assert enabled.json()["enabled"] and enabled.json()["next_fire_at"] == created["next_fire_at"]

    every = await client.patch(url, json={"config": {"interval_s": 120}})
    assert every.status_code == 200, every.text
    assert every.json()["next_fire_at"] != created["next_fire_at"]

    problem = assert_problem(await client.post(f"{url}/rotate-secret"), 409, "conflict")
    assert "no secret" in problem["detail"]
    assert_problem(await client.post("/v1/triggers/trg_missing/enable"), 404, "not_found")
    assert (await client.post(f"{url}/disable")).status_code == 200  # it would fire every 2 min


async def read_between(
    client: httpx.AsyncClient, method: str, url: str, **kwargs: Any
) -> tuple[dict[str, Any], datetime, datetime]:
    """A trigger read through the API, and moments just before and after the request."""
    before = datetime.now(UTC)
    response = await client.request(method, url, **kwargs)
    assert response.status_code in (200, 201), response.text
    return response.json(), before, datetime.now(UTC)


def shown_times(trigger: dict[str, Any]) -> list[datetime]:
    return [datetime.fromisoformat(t) for t in trigger["next_fire_times"]]


def expected_times(config: dict[str, Any], before: datetime, after: datetime) -> list[Any]:
    """What the server may have computed at some moment between `before` and `after`."""
    parsed = ScheduleConfig.model_validate(config)
    return [next_fires(parsed, moment, 5) for moment in (before, after)]


async def test_a_schedule_shows_its_next_fire_times(client: httpx.AsyncClient) -> None:
    agent_id = await agent(client)
    start = datetime.now(UTC)
    created, before, after = await read_between(
        client, "POST", "/v1/triggers", json=schedule(agent_id, cron="30 2 * * *")
    )
    url = f"/v1/triggers/{created['id']}"
    times = shown_times(created)
    assert times in expected_times(created["config"], before, after) and len(times) == 5
    assert times[0] == datetime.fromisoformat(created["next_fire_at"])
    berlin = [t.astimezone(ZoneInfo("Europe/Berlin")) for t in times]
    assert all((t.hour, t.minute) in ((2, 30), (3, 0)) for t in berlin)  # 03:00: spring

    got, before, after = await read_between(client, "GET", url)
    assert shown_times(got) in expected_times(got["config"], before, after)
    listed = await made_since(client, start, kind="schedule")
    assert [len(t["next_fire_times"]) for t in listed] == [5]

    paused = (await client.post(f"{url}/disable")).json()
    assert paused["next_fire_times"] == [] and paused["next_fire_at"] is None
    resumed = (await client.post(f"{url}/enable")).json()
    assert len(resumed["next_fire_times"]) == 5

    every, before, after = await read_between(
        client, "PATCH", url, json={"config": {"interval_s": 7200}}
    )
    times = shown_times(every)
    assert times in expected_times(every["config"], before, after)
    assert {b - a for a, b in itertools.pairwise(times)} == {timedelta(hours=2)}

    hook = await create(client, webhook(agent_id))
    assert hook["next_fire_times"] is None
    assert (await client.get(f"/v1/triggers/{hook['id']}")).json()["next_fire_times"] is None
    await pause_schedules(client, start)


async def test_an_idempotent_create_replays_the_trigger(client: httpx.AsyncClient) -> None:
    body = webhook(await agent(client))
    headers = {"Idempotency-Key": unique("create")}
    start = datetime.now(UTC)
    first = await client.post("/v1/triggers", json=body, headers=headers)
    second = await client.post("/v1/triggers", json=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()  # the secret included: the client may have lost it
    other = await client.post("/v1/triggers", json={**body, "name": "x"}, headers=headers)
    assert_problem(other, 409, "idempotency_key_reused")
    assert len(await made_since(client, start)) == 1
    # Once the trigger is gone, its key has nothing to replay.
    await client.delete(f"/v1/triggers/{first.json()['id']}")
    gone = await client.post("/v1/triggers", json=body, headers=headers)
    assert "was deleted" in assert_problem(gone, 409, "conflict")["detail"]


async def fields_refused(client: httpx.AsyncClient, body: dict[str, Any]) -> list[str]:
    problem = assert_problem(await client.post("/v1/triggers", json=body), 422, "validation_error")
    return [e["field"] for e in problem["errors"]]


async def test_bad_templates_are_refused_naming_the_field(client: httpx.AsyncClient) -> None:
    agent_id = await agent(client)
    bad_input = webhook(agent_id)
    bad_input["target"]["input"] = "New: {{ payload.title"
    assert await fields_refused(client, bad_input) == ["body.target.input"]

    wrong_root = schedule(agent_id)
    wrong_root["target"]["metadata"] = {"who": ["{{ payload.user }}"]}
    assert await fields_refused(client, wrong_root) == ["body.target.metadata.who[0]"]

    workflow = webhook(agent_id)
    workflow["target"] = {
        "kind": "workflow",
        "workflow_id": "wf_x",
        "context": {"ticket": "{{ payload.a == 1 }}"},
    }
    assert await fields_refused(client, workflow) == ["body.target.context.ticket"]

    no_kind = webhook(agent_id)
    del no_kind["target"]["kind"]
    assert await fields_refused(client, no_kind) == ["body.target.kind"]


async def test_bad_configs_are_refused_naming_the_field(client: httpx.AsyncClient) -> None:
    agent_id = await agent(client)
    schema = {"type": "object", "properties": {"n": {"type": 5}}}
    assert await fields_refused(client, webhook(agent_id, config={"payload_schema": schema})) == [
        "body.config.payload_schema.properties.n.type"
    ]
    assert await fields_refused(client, schedule(agent_id, cron="every day")) == [
        "body.config.cron"
    ]
    assert await fields_refused(client, schedule(agent_id, timezone="Europe/Atlantis")) == [
        "body.config.timezone"
    ]
    assert await fields_refused(client, schedule(agent_id, interval_s=600)) == ["body.config"]
    fields = await fields_refused(client, {**webhook(agent_id), "kind": "cron"})
    assert fields == ["kind"]


async def test_the_target_must_exist(client: httpx.AsyncClient) -> None:
    start = datetime.now(UTC)
    problem = assert_problem(
        await client.post("/v1/triggers", json=webhook("agent_missing")), 404, "not_found"
    )
    assert problem["resource"] == "agent" and problem["id"] == "agent_missing"
    body = webhook(await agent(client))
    body["target"]["conversation_id"] = "conv_missing"
    problem = assert_problem(await client.post("/v1/triggers", json=body), 404, "not_found")
    assert problem["resource"] == "conversation"
    body["target"] = {"kind": "workflow", "workflow_id": "wf_missing"}
    problem = assert_problem(await client.post("/v1/triggers", json=body), 404, "not_found")
    assert problem["resource"] == "workflow"
    assert await made_since(client, start) == []


def chain(source: str, target: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "chain",
        "name": f"{source} then {target}",
        "config": {"source": "run", "agent_id": source, "statuses": ["failed"]},
        "target": {"kind": "run", "agent_id": target, "input": "Why: {{ source.error }}"},
        **fields,
    }


async def test_a_chain_cycle_is_refused_at_save(client: httpx.AsyncClient) -> None:
    first, second = await agent(client), await agent(client)
    forward = await create(client, chain(first, second))
    assert forward["config"]["statuses"] == ["failed"] and forward["secret"] is None

    back = await client.post("/v1/triggers", json=chain(second, first))
    problem = assert_problem(back, 422, "validation_error")
    assert problem["errors"][0]["field"] == "body.target"
    assert "cycle" in problem["errors"][0]["message"]
    assert_problem(
        await client.post("/v1/triggers", json=chain(first, first)), 422, "validation_error"
    )

    # A disabled chain is no link until it is enabled, and then the check applies.
    parked = await create(client, chain(second, first, enabled=False))
    url = f"/v1/triggers/{parked['id']}"
    assert_problem(await client.post(f"{url}/enable"), 422, "validation_error")
    # An enabled chain patched into a cycle is refused too; patched elsewhere it is not.
    third = await agent(client)
    onward = await create(client, chain(second, third))
    into_cycle = {"kind": "run", "agent_id": first, "input": "again"}
    patch = await client.patch(f"/v1/triggers/{onward['id']}", json={"target": into_cycle})
    assert_problem(patch, 422, "validation_error")
    renamed = await client.patch(f"/v1/triggers/{onward['id']}", json={"name": "x"})
    assert renamed.status_code == 200
    rewired = {"source": "workflow", "workflow_id": "wf_any"}
    moved = await client.patch(f"/v1/triggers/{onward['id']}", json={"config": rewired})
    assert moved.status_code == 200, moved.text
