"""`loopwright triggers`, run as a person runs it against a real server: the list, and a
signed test delivery to a webhook trigger that prints (and follows) the run it started;
and `loopwright schedules`, with their next fire times. The server is shared: a test reads
the rows of its own triggers from the lists, and pauses the schedules it armed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from tests.support.cli import cli
from tests.support.factories import create_workflow, unique
from tests.triggers.test_hooks_api import own_line, webhook_trigger
from tests.triggers.test_triggers_api import create, pause_schedules, schedule


def own(rows: list[str], *triggers: dict[str, Any]) -> list[str]:
    """The rows of a table that begin with one of these triggers' ids."""
    ids = {t["id"] for t in triggers}
    return [row for row in rows if row.split()[0] in ids]


async def test_triggers_lists_them(client: httpx.AsyncClient, base_url: str) -> None:
    start = datetime.now(UTC)
    hook = await webhook_trigger(client)
    agent_id = hook["target"]["agent_id"]
    timer = await create(
        client,
        {
            "kind": "schedule",
            "name": unique("timer"),
            "config": {"interval_s": 600},
            "target": {"kind": "run", "agent_id": agent_id, "input": "tick"},
        },
    )
    workflow = await create_workflow(client, **own_line())
    flow = await create(
        client,
        {
            "kind": "webhook",
            "name": unique("flow"),
            "target": {"kind": "workflow", "workflow_id": workflow["id"]},
        },
    )

    listed = await cli(base_url, "triggers")

    assert listed.code == 0, listed
    header, *rows = listed.out.splitlines()
    assert header.split()[:5] == ["TRIGGER", "KIND", "NAME", "ENABLED", "TARGET"]
    rows = own(rows, hook, timer, flow)
    assert [row.split()[:4] for row in rows] == [
        [hook["id"], "webhook", hook["name"], "yes"],
        [timer["id"], "schedule", timer["name"], "yes"],
        [flow["id"], "webhook", flow["name"], "yes"],
    ]
    assert f"run of {agent_id}" in rows[0] and timer["next_fire_at"] in rows[1]
    assert f"workflow {workflow['id']}" in rows[2]
    fired = await cli(base_url, "triggers", "fire", flow["id"], "--secret", flow["secret"])
    assert fired.code == 0, fired
    assert ": started execution wfx_" in fired.out
    only = await cli(base_url, "triggers", "list", "--kind", "schedule")
    kinds = {row.split()[1] for row in only.out.splitlines()[1:]}
    assert kinds <= {"schedule"}  # another test's schedules may be listed too, nothing else
    assert [row.split()[0] for row in own(only.out.splitlines()[1:], hook, timer, flow)] == [
        timer["id"]
    ]
    await pause_schedules(client, start)


async def test_fire_sends_a_signed_delivery_and_follows_its_run(
    client: httpx.AsyncClient, base_url: str
) -> None:
    hook = await webhook_trigger(client)
    payload = '{"issue": {"number": 3, "title": "Slow"}}'

    fired = await cli(
        base_url,
        "triggers",
        "fire",
        hook["id"],
        "--payload",
        payload,
        "--delivery",
        "cli-1",
        "--follow",
        env={"LOOPWRIGHT_TRIGGER_SECRET": hook["secret"]},
    )

    assert fired.code == 0, fired
    first = fired.out.splitlines()[0]
    assert first.startswith("fire fire_") and ": started run run_" in first
    run_id = first.rsplit(" ", 1)[1]
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["input"] == "New issue #3: Slow" and run["status"] == "completed"
    assert fired.out.splitlines()[-1] == "[completed] end_turn"

    again = await cli(
        base_url,
        "triggers",
        "fire",
        hook["id"],
        "--payload",
        payload,
        "--delivery",
        "cli-1",
        "--secret",
        hook["secret"],
    )
    assert again.out.splitlines() == [first]  # the same delivery: the first answer


async def test_fire_refusals(client: httpx.AsyncClient, base_url: str) -> None:
    hook = await webhook_trigger(client)

    no_secret = await cli(base_url, "triggers", "fire", hook["id"])
    assert no_secret.code == 2 and "LOOPWRIGHT_TRIGGER_SECRET" in no_secret.err
    no_id = await cli(base_url, "triggers", "fire", "--secret", "s")
    assert no_id.code == 2 and "say which trigger" in no_id.err
    bad_json = await cli(
        base_url, "triggers", "fire", hook["id"], "--secret", "s", "--payload", "{"
    )
    assert bad_json.code == 2 and "--payload is not JSON" in bad_json.err
    wrong = await cli(base_url, "triggers", "fire", hook["id"], "--secret", "whsec_wrong")
    assert wrong.code == 6 and "401 signature_invalid" in wrong.err

    await client.delete(f"/v1/agents/{hook['target']['agent_id']}")
    failed = await cli(
        base_url,
        "triggers",
        "fire",
        hook["id"],
        "--secret",
        hook["secret"],
        "--payload",
        '{"issue": {"number": 1}}',
    )
    assert failed.code == 1, failed
    assert ": failed: agent" in failed.out and "does not exist" in failed.out


def schedule_lines(out: str, *triggers: dict[str, Any]) -> list[str]:
    """The lines of these schedules in `loopwright schedules`: each one's row and the
    lines below it, up to the next schedule's row."""
    ids = {t["id"] for t in triggers}
    found: list[str] = []
    mine = False
    for line in out.splitlines()[1:]:
        if not line.startswith(" "):
            mine = line.split()[0] in ids
        if mine:
            found.append(line)
    return found


async def test_schedules_lists_them_with_their_next_fire_times(
    client: httpx.AsyncClient, base_url: str
) -> None:
    start = datetime.now(UTC)
    hook = await webhook_trigger(client)  # not a schedule: not listed
    agent_id = hook["target"]["agent_id"]
    nightly = await create(client, schedule(agent_id, cron="30 2 * * *"))
    timer = await create(
        client,
        {
            "kind": "schedule",
            "name": unique("timer"),
            "config": {"interval_s": 5400},
            "target": {"kind": "run", "agent_id": agent_id, "input": "tick"},
        },
    )
    paused = await create(
        client, schedule(agent_id, cron="0 9 * * MON-FRI") | {"name": unique("off")}
    )
    await client.post(f"/v1/triggers/{paused['id']}/disable")

    listed = await cli(base_url, "schedules")

    assert listed.code == 0, listed
    header = listed.out.splitlines()[0]
    assert header.split() == ["TRIGGER", "NAME", "SCHEDULE", "ZONE", "ENABLED", "NEXT", "FIRES"]
    assert hook["id"] not in listed.out
    lines = schedule_lines(listed.out, hook, nightly, timer, paused)
    # Each schedule's five times: its first on its row, the others on the lines below it.
    assert len(lines) == 5 + 5 + 1 and all(line.startswith(" ") for line in lines[1:5])
    first, timer_row, off_row = (line.split() for line in (lines[0], lines[5], lines[10]))
    assert first[:9] == [
        nightly["id"],
        nightly["name"],
        *("30", "2", "*", "*", "*"),
        "Europe/Berlin",
        "yes",
    ]
    assert timer_row[:6] == [timer["id"], timer["name"], "every", "1h30m", "UTC", "yes"]
    assert off_row[0] == paused["id"] and off_row[-2:] == ["no", "paused"]
    berlin = ZoneInfo("Europe/Berlin")
    shown = [datetime.fromisoformat(t).astimezone(berlin) for t in nightly["next_fire_times"]]
    assert [line.split()[-3:] for line in lines[0:5]] == [
        [t.strftime("%Y-%m-%d"), t.strftime("%H:%M"), t.strftime("%Z")] for t in shown
    ]
    assert all(line.split()[-1] == "UTC" for line in lines[5:10])
    await pause_schedules(client, start)
