"""`loopwright tasks coordinate` and `loopwright coordinations show|follow`, run as a person
runs them against a real server: the subtasks from a YAML or JSON file, the options sent,
each event in a line while it is followed, the exit status it settled with, the summary."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.coordination.test_coordination_api import Crew, settled, subtask
from tests.support.cli import cli
from tests.support.factories import create_task, unique


def _subtasks(crew: Crew) -> list[dict[str, Any]]:
    return [
        crew.subtask("Revenue", role="researcher", key="revenue"),
        crew.subtask("Costs", role="researcher"),
        crew.subtask("Summary", "revenue", 1, role="researcher"),
    ]


async def _team(client: httpx.AsyncClient) -> Crew:
    crew = Crew(client)
    await crew.agent("ann", role="researcher")
    await crew.agent("bob", role="researcher")
    await crew.agent("lead", {"text": "the synthesis"}, role="lead")
    return crew


async def test_coordinate_follows_each_phase_and_exits_0_when_it_completes(
    client: httpx.AsyncClient, base_url: str, tmp_path: Path
) -> None:
    crew = await _team(client)
    ann, bob, lead = (crew.name(name) for name in ("ann", "bob", "lead"))
    parent = await create_task(client, title="Quarterly report", task_structure="parallel")
    path = tmp_path / "subtasks.yaml"
    path.write_text(yaml.safe_dump({"subtasks": _subtasks(crew)}))

    done = await cli(
        base_url,
        *("tasks", "coordinate", parent["id"], "--file", str(path)),
        *("--orchestrator", lead, "--auto-accept", "--follow"),
    )

    assert done.code == 0, done
    first, *lines = done.out.splitlines()
    found = re.fullmatch(rf"coordination (coord_\w+) of task {parent['id']} \(running\)", first)
    assert found, first
    assert lines[0] == f"started: task {parent['id']}, subtasks given"
    skipped = r"decompose skipped \d+ ms: given with the request: 3 subtasks"
    assert any(re.fullmatch(skipped, x) for x in lines)
    assert any(re.fullmatch(r"route ok \d+ ms: 3 of 3 subtasks have an agent", x) for x in lines)
    started = [x for x in lines if x.startswith("▸ subtask")]
    assert [x.split()[2:5] for x in started] == [
        ["0", "(wave", "0)"],
        ["1", "(wave", "0)"],
        ["2", "(wave", "1)"],
    ]
    assert all(re.search(rf" to ({ann}|{bob}): task_\w+_\d$", x) for x in started), started
    assert any(re.fullmatch(r"· synthesis run run_\w+", x) for x in lines)
    assert lines[-1].startswith("[completed] (task completed)")

    # The same events again, from the first, and the summary.
    coordination_id = found[1]
    again = await cli(base_url, "coordinations", "follow", coordination_id)
    assert again.code == 0 and again.out.splitlines() == lines
    shown = await cli(base_url, "coordinations", "show", coordination_id)
    assert shown.code == 0, shown
    out = shown.out.splitlines()
    assert out[0] == (
        f"coordination {coordination_id}  completed  of task {parent['id']} (Quarterly report)"
    )
    assert out[1] == f"phase update_parent  topology centralized  orchestrator {lead}"
    assert out[2].startswith("outcome completed: ")
    assert out[3] == "phases:" and out[5].startswith("  route ok ") and len(out[4:11]) == 7
    header = out[11].split()
    assert header == ["SUBTASK", "WAVE", "STATUS", "AGENT", "TASK", "TITLE"]
    rows = [row.split() for row in out[12:15]]
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
        ("0", "0", "completed", "Revenue"),
        ("1", "0", "completed", "Costs"),
        ("2", "1", "completed", "Summary"),
    ]
    assert {r[3] for r in rows} <= {ann, bob} and rows[0][4].endswith("_0")
    assert re.fullmatch(r"synthesis run run_\w+", out[15])


async def test_a_coordination_that_fails_exits_1_and_options_reach_the_server(
    client: httpx.AsyncClient, base_url: str, tmp_path: Path
) -> None:
    parent = await create_task(client, title="Alone")
    path = tmp_path / "subtasks.json"
    role = unique("astronaut")  # no agent's
    path.write_text(json.dumps([subtask("Nobody can", role=role)]))  # a list will do

    failed = await cli(
        base_url,
        *("tasks", "coordinate", parent["id"], "--file", str(path), "--follow"),
        *("--topology", "centralized", "--max-concurrency", "2", "--fail-fast"),
    )

    assert failed.code == 1, failed
    lines = failed.out.splitlines()
    assert "route ok" in lines[-4] and "0 of 1 subtasks have an agent" in lines[-4]
    assert lines[-2].startswith("validate failed ") and "no agent is of role" in lines[-2]
    assert lines[-1].startswith("[failed]: no subtask could be routed")
    coordination_id = lines[0].split()[1]
    made = (await client.get(f"/v1/coordinations/{coordination_id}")).json()
    assert made["request"]["options"] | {"routing_strategy": None} == {
        "topology": "centralized",
        "routing_strategy": None,
        "max_concurrency_per_wave": 2,
        "fail_fast": True,
        "decomposer": None,
        "orchestrator": None,
        "debate_rounds": 1,
        "auto_accept": False,
    }
    shown = await cli(base_url, "coordinations", "show", coordination_id)
    assert f"none: no agent is of role '{role}'" in shown.out
    assert (await cli(base_url, "coordinations", "follow", coordination_id)).code == 1


async def test_without_follow_it_prints_how_to_follow_and_refusals_are_one_line(
    client: httpx.AsyncClient, base_url: str, tmp_path: Path
) -> None:
    crew = Crew(client)
    await crew.agent("ann")
    parent = await create_task(client, title="Plan")
    path = tmp_path / "subtasks.yaml"
    path.write_text(yaml.safe_dump({"subtasks": [subtask("A", 1), subtask("B", 0)]}))
    cycle = await cli(base_url, "tasks", "coordinate", parent["id"], "--file", str(path))
    assert cycle.code == 6 and cycle.err.startswith("loopwright: 422 validation_error"), cycle
    assert "subtasks[1].depends_on[0]" in cycle.err

    path.write_text(yaml.safe_dump({"subtasks": [crew.subtask("A")]}))
    detached = await cli(
        base_url, "tasks", "coordinate", parent["id"], "--file", str(path), "--auto-accept"
    )
    assert detached.code == 0, detached
    coordination_id = detached.out.split()[1]
    assert detached.out.splitlines()[1] == (
        f"follow it: loopwright coordinations follow {coordination_id}"
    )
    assert (await settled(client, coordination_id))["status"] == "completed"

    no_task = await cli(base_url, "tasks", "coordinate")
    assert no_task.code == 2 and "say which task" in no_task.err
    path.write_text("subtasks: [")
    broken = await cli(base_url, "tasks", "coordinate", parent["id"], "--file", str(path))
    assert broken.code == 2 and "is not YAML or JSON" in broken.err
    missing = await cli(base_url, "coordinations", "show", "coord_none")
    assert missing.code == 6 and "404 not_found" in missing.err
