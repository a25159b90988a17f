"""`loopwright board` and `loopwright tasks move`, run as a person runs them against a real
server: the columns with counts against WIP limits, a limit set and removed, moves, and
the refusals' exits."""

from __future__ import annotations

import httpx

from tests.support.cli import cli
from tests.support.factories import create_task, project, unique
from tests.tasks.test_boards_api import board, column


async def test_board_prints_columns_with_counts_limits_and_shortened_titles(
    client: httpx.AsyncClient, base_url: str
) -> None:
    atlas, ann = project(), unique("ann")
    long_title = "Write the migration guide for every release since the first one, in detail"
    first = await create_task(client, title=long_title, project=atlas)
    second = await create_task(client, title="Ship it", project=atlas, assigned_to=ann)
    blocked = await create_task(client, title="Stuck", project=atlas, assigned_to=ann)
    await client.post(f"/v1/tasks/{blocked['id']}/transitions", json={"to": "blocked"})

    limited = await cli(base_url, "board", atlas, "--limit", "ready", "1")
    assert limited.code == 0, limited
    lines = limited.out.splitlines()
    assert lines[:3] == ["WIP limit of ready: 1 (strict)", "", f"board of {atlas}"]
    assert lines[3:] == [
        "",
        "backlog  1",
        f"  {first['id']}  Write the migration guide for every release since the first…",
        "",
        "ready  1 / 1 strict, full",
        f"  {second['id']}  Ship it",
        "",
        "in_progress  0",
        "",
        "review  0",
        "",
        "done  0",
        "",
        "off the board  1",
        f"  {blocked['id']}  [blocked] Stuck",
    ]

    advisory = await cli(base_url, "board", atlas, "--limit", "backlog", "1", "--advisory")
    assert advisory.code == 0, advisory
    assert "backlog  1 / 1 advisory, full" in advisory.out
    removed = await cli(base_url, "board", atlas, "--no-limit", "backlog")
    assert removed.code == 0, removed
    assert removed.out.startswith("WIP limit of backlog removed\n")
    assert "\nbacklog  1\n" in removed.out
    assert column(await board(client, atlas), "backlog")["wip_limit"] is None

    # Wrong limits are the command line's fault; a limit that is not there, the server's.
    for wrong in (["--limit", "nowhere", "2"], ["--limit", "ready", "0"], ["--advisory"]):
        refused = await cli(base_url, "board", atlas, *wrong)
        assert refused.code == 2, refused
    gone = await cli(base_url, "board", atlas, "--no-limit", "backlog")
    assert gone.code == 6 and "404 not_found" in gone.err


async def test_tasks_move_walks_to_the_column_and_a_full_one_refuses(
    client: httpx.AsyncClient, base_url: str
) -> None:
    atlas, ann = project(), unique("ann")
    first = await create_task(client, title="A", project=atlas)
    second = await create_task(client, title="B", project=atlas, assigned_to=unique("bob"))
    await client.put(f"/v1/projects/{atlas}/wip-limits/in_progress", json={"limit": 1})

    moved = await cli(
        base_url, "tasks", "move", first["id"], "in_progress", "--assign", ann, "--reason", "go"
    )
    assert moved.code == 0, moved
    assert (
        moved.out.strip() == f"task {first['id']}: in_progress in in_progress (assigned to {ann})"
    )
    trail = (await client.get(f"/v1/tasks/{first['id']}/transitions")).json()
    assert [t["reason"] for t in trail[1:]] == ["go", "go"]

    full = await cli(base_url, "tasks", "move", second["id"], "in_progress")
    assert full.code == 6, full
    assert full.err.strip() == (
        f"loopwright: 409 wip_limit_reached: column 'in_progress' of project '{atlas}' holds 1 "
        "tasks, its WIP limit is 1"
    )
    unassigned = await create_task(client, title="C", project=atlas)
    needs = await cli(base_url, "tasks", "move", unassigned["id"], "ready")
    assert (
        needs.code == 6
        and "409 invalid_transition" in needs.err
        and "needs an assignee" in needs.err
    )
    done = await cli(base_url, "tasks", "move", first["id"], "done")
    assert done.code == 0, done
    final = await cli(base_url, "tasks", "move", first["id"], "backlog")
    assert final.code == 6 and "409 invalid_transition" in final.err
    usage = await cli(base_url, "tasks", "move", first["id"])
    assert usage.code == 2 and "loopwright tasks move TASK" in usage.err
    nowhere = await cli(base_url, "tasks", "move", first["id"], "nowhere")
    assert nowhere.code == 2 and "invalid choice" in nowhere.err
