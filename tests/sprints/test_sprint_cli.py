"""`loopwright sprints`, run as a person runs it against a real server: a sprint planned,
filled with tasks and points, advanced through its lifecycle to its velocity, listed and
shown; and the refusals' exits (the command line's fault: 2; the server's: 6, its
problem's detail on one line)."""

from __future__ import annotations

import httpx

from tests.sprints.test_sprints_api import finish_task
from tests.support.cli import cli
from tests.support.factories import create_task, project, unique


async def test_a_sprint_planned_advanced_and_measured_from_the_command_line(
    client: httpx.AsyncClient, base_url: str
) -> None:
    atlas, ann = project(), unique("ann")
    one = await create_task(client, title="Write the export", project=atlas, assigned_to=ann)
    two = await create_task(client, title="Ship it", project=atlas, assigned_to=ann)

    created = await cli(
        base_url,
        *("sprints", "create", "--project", atlas, "--name", "Sprint 14"),
        *("--start", "2099-12-01", "--end", "2099-12-14", "--goal", "billing export"),
        "--auto-transition",
    )
    assert created.code == 0, created
    sprint_id = created.out.split()[1]
    assert created.out.splitlines() == [
        f"sprint {sprint_id}  Sprint 14  [planning]",
        f"project {atlas}, 2099-12-01 to 2099-12-14 (14 days), to in_review by the clock after "
        "its end",
        "goal: billing export",
        "points: 0 completed of 0 committed",
        f"no tasks (loopwright sprints add {sprint_id} TASK=POINTS)",
    ]
    assert (await client.get(f"/v1/sprints/{sprint_id}")).json()["auto_transition"] is True

    added = await cli(base_url, "sprints", "add", sprint_id, f"{one['id']}=3", f"{two['id']}=5")
    assert added.code == 0, added
    assert "points: 0 completed of 8 committed" in added.out
    assert added.out.splitlines()[-3:] == [
        "TASK" + " " * (len(one["id"]) - 4) + "  POINTS  STATUS    TITLE",
        f"{one['id']}  3       assigned  Write the export",
        f"{two['id']}  5       assigned  Ship it",
    ]
    removed = await cli(base_url, "sprints", "remove", sprint_id, two["id"])
    assert removed.code == 0 and "points: 0 completed of 3 committed" in removed.out

    listed = await cli(base_url, "sprints", "list", "--project", atlas)
    assert listed.code == 0, listed
    header, row = listed.out.splitlines()
    columns = ["SPRINT", "PROJECT", "NAME", "STATUS", "DATES", "DONE/POINTS", "CLOCK"]
    assert header.split() == columns
    assert row.split() == [
        sprint_id,
        *[atlas, "Sprint", "14", "planning", "2099-12-01", "to", "2099-12-14", "0/3", "auto"],
    ]
    none_active = await cli(base_url, "sprints", "list", "--project", atlas, "--status", "active")
    assert none_active.out.startswith("no sprints (")

    started = await cli(base_url, "sprints", "advance", sprint_id)
    assert started.code == 0 and started.out == f"sprint {sprint_id}: planning → active\n"
    late = await cli(base_url, "sprints", "add", sprint_id, f"{two['id']}=1")
    assert late.code == 6, late
    assert late.err.startswith(f"loopwright: 409 sprint_locked: sprint {sprint_id} is active")

    await finish_task(client, one["id"])
    shown = await cli(base_url, "sprints", "show", sprint_id)
    assert "points: 3 completed of 3 committed" in shown.out
    assert f"{one['id']}  3       completed  Write the export" in shown.out
    steps = [await cli(base_url, "sprints", "advance", sprint_id) for _ in range(3)]
    assert [s.out.splitlines()[0].split(": ")[1] for s in steps] == [
        "active → in_review",
        "in_review → retrospective",
        "retrospective → completed",
    ]
    assert steps[-1].out.splitlines()[1] == (
        "velocity: 3 completed of 3 committed (fixed at completion)"
    )
    over = await cli(base_url, "sprints", "advance", sprint_id)
    assert over.code == 6 and over.err == (
        f"loopwright: sprint {sprint_id} is completed: it goes no further\n"
    )

    rate = await cli(base_url, "sprints", "velocity", atlas, "--window", "2")
    assert rate.code == 0, rate
    lines = rate.out.splitlines()
    assert lines[0] == (
        f"velocity of {atlas}: 3.0 points completed of 3.0 committed, the mean of the last 1 "
        "completed sprint (window 2)"
    )
    assert lines[3].split()[:6] == [sprint_id, "Sprint", "14", "2099-12-01", "to", "2099-12-14"]
    borealis = project()
    empty = await cli(base_url, "sprints", "velocity", borealis)
    assert empty.out == f"velocity of {borealis}: no completed sprint yet\n"


async def test_the_refusals_exit_with_the_problem(base_url: str) -> None:
    create = ("sprints", "create", "--project", project(), "--name", "S")
    backwards = await cli(base_url, *create, "--start", "2099-12-14", "--end", "2099-12-01")
    assert backwards.code == 6
    assert backwards.err == (
        "loopwright: 422 validation_error: end_date: must not be before start_date\n"
    )
    for wrong in (
        [*create, "--start", "2099-12-01", "--end", "14 Dec"],  # not a date
        [*create, "--start", "2099-12-01"],  # no end
        ["sprints", "add", "sprint_x", "task_y"],  # no points
        ["sprints", "add", "sprint_x", "task_y=-1"],
        ["sprints", "list", "--status", "sleeping"],
        ["sprints", "velocity", "atlas", "--window", "0"],
        ["sprints"],
    ):
        refused = await cli(base_url, *wrong)
        assert refused.code == 2, (wrong, refused)
    pointless = await cli(base_url, "sprints", "add", "sprint_x", "task_y")
    assert pointless.err == (
        "loopwright: 'task_y' is not TASK=POINTS (points: a whole number from 0)\n"
    )

    missing = await cli(base_url, "sprints", "show", "sprint_nope")
    assert missing.code == 6
    assert missing.err == "loopwright: 404 not_found: sprint 'sprint_nope' does not exist\n"
    window = await cli(base_url, "sprints", "velocity", "atlas", "--window", "51")
    assert window.code == 6 and "422 validation_error" in window.err and "window" in window.err
