"""Sprints from the command line: `loopwright sprints list|show|create|add|remove|advance|
velocity`. A command that changes a sprint prints it as the server left it; a refusal is
the server's problem on one line, exit 6."""

from __future__ import annotations

import argparse
from datetime import date
from typing import Any

from app.client.arguments import count
from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages, segment
from app.client.output import one_line, print_table
from app.core.states import SPRINT_ALLOWED, SprintStatus

TITLE_WIDTH = 60


def list_sprints(args: argparse.Namespace, client: Client) -> Exit:
    """Oldest first, one a line."""
    found = all_pages(client, "/v1/sprints", project=args.project, status=args.status)
    if not found:
        print("no sprints (loopwright sprints create --project P --name N --start … --end …)")
        return Exit.COMPLETED
    rows = [
        (
            s["id"],
            s["project"],
            s["name"],
            s["status"],
            f"{s['start_date']} to {s['end_date']}",
            f"{s['completed_points']}/{s['committed_points']}",
            "auto" if s["auto_transition"] else "",
        )
        for s in found
    ]
    print_table(rows, ("SPRINT", "PROJECT", "NAME", "STATUS", "DATES", "DONE/POINTS", "CLOCK"))
    return Exit.COMPLETED


def show(args: argparse.Namespace, client: Client) -> Exit:
    print_sprint(client.get(f"/v1/sprints/{segment(args.id)}"))
    return Exit.COMPLETED


def create(args: argparse.Namespace, client: Client) -> Exit:
    body = {
        "project": args.project,
        "name": args.name,
        "goal": args.goal or "",
        "start_date": args.start,
        "end_date": args.end,
        "auto_transition": args.auto_transition,
    }
    print_sprint(client.post("/v1/sprints", body))
    return Exit.COMPLETED


def add(args: argparse.Namespace, client: Client) -> Exit:
    """`sprints add ID TASK=POINTS ...`: the tasks join the planned sprint (a task in it
    already gets these points)."""
    tasks = [{"task_id": task, "story_points": points} for task, points in _pairs(args.tasks)]
    print_sprint(client.post(f"/v1/sprints/{segment(args.id)}/tasks", {"tasks": tasks}))
    return Exit.COMPLETED


def remove(args: argparse.Namespace, client: Client) -> Exit:
    path = f"/v1/sprints/{segment(args.id)}/tasks/{segment(args.task)}"
    print_sprint(client.delete(path))
    return Exit.COMPLETED


def advance(args: argparse.Namespace, client: Client) -> Exit:
    """One step along the lifecycle: each status has exactly one next. Two people (or the
    sprint clock) advancing at once move it one step: the second asks for a step it is no
    longer at, and the server refuses it (`invalid_transition`)."""
    sprint = client.get(f"/v1/sprints/{segment(args.id)}")
    current = SprintStatus(sprint["status"])
    following = sorted(SPRINT_ALLOWED[current])
    if not following:
        raise ClientError(f"sprint {sprint['id']} is {current.value}: it goes no further")
    moved = client.post(f"/v1/sprints/{sprint['id']}/transitions", {"to": following[0].value})
    print(f"sprint {moved['id']}: {current.value} → {moved['status']}")
    if moved["status"] == SprintStatus.COMPLETED:
        print(f"velocity: {_points(moved)}")
    return Exit.COMPLETED


def velocity(args: argparse.Namespace, client: Client) -> Exit:
    """The average over the newest `--window` completed sprints, then each one, newest
    first."""
    report = client.get(
        f"/v1/projects/{segment(args.project)}/velocity", window=args.window, limit=args.limit
    )
    averaged = report["sprints_averaged"]
    if not averaged:
        print(f"velocity of {report['project']}: no completed sprint yet")
        return Exit.COMPLETED
    print(
        f"velocity of {report['project']}: {report['average_completed_points']:.1f} points "
        f"completed of {report['average_committed_points']:.1f} committed, the mean of the "
        f"last {averaged} completed sprint{'s' * (averaged > 1)} (window {report['window']})"
    )
    rows = [
        (
            r["sprint_id"],
            r["name"],
            f"{r['start_date']} to {r['end_date']}",
            str(r["completed_points"]),
            str(r["committed_points"]),
            r["completed_at"][:10],
        )
        for r in report["records"]
    ]
    print()
    print_table(rows, ("SPRINT", "NAME", "DATES", "DONE", "COMMITTED", "COMPLETED ON"))
    return Exit.COMPLETED


def print_sprint(sprint: dict[str, Any]) -> None:
    """Its name, status and dates, its points, then its backlog, one task a line."""
    clock = ", to in_review by the clock after its end" if sprint["auto_transition"] else ""
    print(f"sprint {sprint['id']}  {sprint['name']}  [{sprint['status']}]")
    print(
        f"project {sprint['project']}, {sprint['start_date']} to {sprint['end_date']} "
        f"({sprint['duration_days']} days){clock}"
    )
    if sprint["goal"]:
        print(f"goal: {one_line(sprint['goal'], 200)}")
    print(f"points: {_points(sprint)}")
    if not sprint["tasks"]:
        print(f"no tasks (loopwright sprints add {sprint['id']} TASK=POINTS)")
        return
    print()
    rows = [
        (t["task_id"], str(t["story_points"]), t["status"], one_line(t["title"], TITLE_WIDTH))
        for t in sprint["tasks"]
    ]
    print_table(rows, ("TASK", "POINTS", "STATUS", "TITLE"))


def _points(sprint: dict[str, Any]) -> str:
    fixed = " (fixed at completion)" if sprint["status"] == SprintStatus.COMPLETED else ""
    return (
        f"{sprint['completed_points']} completed of {sprint['committed_points']} committed{fixed}"
    )


def _pairs(values: list[str]) -> list[tuple[str, int]]:
    pairs = []
    for value in values:
        task, _, points = value.rpartition("=")
        if not task or not points.isdigit():
            raise ClientError(
                f"{value!r} is not TASK=POINTS (points: a whole number from 0)", Exit.USAGE
            )
        pairs.append((task, int(points)))
    return pairs


def _day(value: str) -> str:
    """A date as YYYY-MM-DD; anything else is the command line's fault (exit 2)."""
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date (YYYY-MM-DD)") from None


def register(commands: Commands) -> None:
    """`loopwright sprints ACTION ...`: each action is a verb of its own."""
    sprints = commands.add_parser(
        "sprints", help="list, show, plan, advance sprints, and a project's velocity"
    )
    actions = sprints.add_subparsers(dest="action", required=True, metavar="ACTION")

    listed = add_verb(actions, "list", "sprints, oldest first", list_sprints)
    listed.add_argument("--project", help="only this project's")
    listed.add_argument(
        "--status", choices=[s.value for s in SprintStatus], help="only those in this status"
    )

    shown = add_verb(
        actions, "show", "a sprint: its backlog with points and statuses, its points", show
    )
    shown.add_argument("id", help="sprint id")

    created = add_verb(actions, "create", "plan a sprint (it starts when advanced)", create)
    created.add_argument("--project", required=True)
    created.add_argument("--name", required=True)
    created.add_argument("--start", required=True, type=_day, help="its first day, YYYY-MM-DD")
    created.add_argument(
        "--end", required=True, type=_day, help="its last day (included), YYYY-MM-DD"
    )
    created.add_argument("--goal", help="what it is for")
    created.add_argument(
        "--auto-transition",
        action="store_true",
        help="once active, the sprint clock moves it to in_review when its end date is past "
        "(00:00 UTC the day after)",
    )

    added = add_verb(
        actions, "add", "commit tasks to a planned sprint, with their story points", add
    )
    added.add_argument("id", help="sprint id")
    added.add_argument("tasks", nargs="+", metavar="TASK=POINTS")

    removed = add_verb(actions, "remove", "take a task out of a planned sprint", remove)
    removed.add_argument("id", help="sprint id")
    removed.add_argument("task", help="task id")

    advanced = add_verb(
        actions,
        "advance",
        "move a sprint to its next status (planning → active → in_review → retrospective → "
        "completed)",
        advance,
    )
    advanced.add_argument("id", help="sprint id")

    rate = add_verb(actions, "velocity", "what a project's completed sprints delivered", velocity)
    rate.add_argument("project")
    rate.add_argument(
        "--window", type=count, default=3, help="completed sprints the average spans (default 3)"
    )
    rate.add_argument("--limit", type=count, default=20, help="sprints listed (default 20)")
