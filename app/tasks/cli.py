"""Tasks and their Kanban boards from the command line: `tasks` lists tasks, `tasks move
TASK COLUMN` moves one to a column, `tasks route TASK` gives one to an agent by a strategy,
`tasks coordinate TASK` has several agents work on it (`app/coordination/cli.py`); `board
PROJECT` prints a project's columns (count against WIP limit, the oldest tasks of each)
and sets or removes a column's WIP limit."""

from __future__ import annotations

import argparse
from typing import Any

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages, segment
from app.client.output import one_line, print_table
from app.coordination import cli as coordinations
from app.core.vocabulary import AssignmentStrategy, BoardColumn, WipMode

COLUMNS = [column.value for column in BoardColumn]
TITLE_WIDTH = 60
CARDS = 10  # tasks a column lists; its count has them all


def tasks(args: argparse.Namespace, client: Client) -> Exit:
    """`loopwright tasks`: list, move, route, or coordinate."""
    if args.action == "coordinate":
        return coordinations.coordinate(args, client)
    if args.action == "move":
        return move(args, client)
    if args.action == "route":
        return route(args, client)
    rows = [
        (t["id"], t["status"], t["priority"], t["assigned_to"] or "", one_line(t["title"], 50))
        for t in all_pages(client, "/v1/tasks", status=args.status)
    ]
    print_table(rows, ("TASK", "STATUS", "PRIORITY", "ASSIGNED TO", "TITLE"))
    return Exit.COMPLETED


def route(args: argparse.Namespace, client: Client) -> Exit:
    """`tasks route TASK --strategy S`: the task goes to the agent the strategy chooses."""
    if not args.id or not args.strategy:
        raise ClientError(
            "say which task and how: loopwright tasks route TASK_ID --strategy S", Exit.USAGE
        )
    body = {"strategy": args.strategy, "role": args.role, "skills": args.skill or []}
    if args.agent:
        body["agent"] = args.agent
    routed = client.post(f"/v1/tasks/{args.id}/route", body)
    chain = " → ".join(routed["delegation_chain"])
    via = f" (via {chain})" if chain else ""
    print(f"task {routed['id']}: {routed['status']} to {routed['assigned_to']}{via}")
    return Exit.COMPLETED


def board(args: argparse.Namespace, client: Client) -> Exit:
    """The board; with `--limit COLUMN N` or `--no-limit COLUMN`, after that change."""
    base = f"/v1/projects/{segment(args.project)}"
    if args.limit:
        column, size = _limit_args(args.limit)
        mode = WipMode.ADVISORY if args.advisory else WipMode.STRICT
        client.put(f"{base}/wip-limits/{column}", {"limit": size, "mode": mode.value})
        print(f"WIP limit of {column}: {size} ({mode.value})\n")
    elif args.advisory:
        raise ClientError("--advisory goes with --limit COLUMN N", Exit.USAGE)
    if args.no_limit:
        client.delete(f"{base}/wip-limits/{args.no_limit}")
        print(f"WIP limit of {args.no_limit} removed\n")
    found = client.get(f"{base}/board")
    print(f"board of {found['project']}")
    for column in found["columns"]:
        print(f"\n{_heading(column)}")
        _print_tasks(column["tasks"], column["count"], args.all)
    if found["off_board"]:
        print(f"\noff the board  {len(found['off_board'])}")
        _print_tasks(found["off_board"], len(found["off_board"]), args.all, status=True)
    return Exit.COMPLETED


def move(args: argparse.Namespace, client: Client) -> Exit:
    """`tasks move TASK COLUMN`: the task walks to the column; a refusal (a full column,
    no way there) is the server's problem, exit 6."""
    if not args.id or args.column not in COLUMNS:
        raise ClientError(
            f"say which task and where: loopwright tasks move TASK {{{','.join(COLUMNS)}}}",
            Exit.USAGE,
        )
    body: dict[str, Any] = {"column": args.column}
    if args.assign:
        body["assigned_to"] = args.assign
    if args.reason:
        body["reason"] = args.reason
    moved = client.post(f"/v1/tasks/{args.id}/move", body)
    to = f" (assigned to {moved['assigned_to']})" if moved["assigned_to"] else ""
    print(f"task {moved['id']}: {moved['status']} in {args.column}{to}")
    return Exit.COMPLETED


def _limit_args(values: list[str]) -> tuple[str, int]:
    column, size = values
    if column not in COLUMNS:
        raise ClientError(f"--limit: no column {column!r} ({', '.join(COLUMNS)})", Exit.USAGE)
    if not size.isdigit() or int(size) < 1:
        raise ClientError(f"--limit: {size!r} is not a whole number from 1", Exit.USAGE)
    return column, int(size)


def _heading(column: dict[str, Any]) -> str:
    """`in_progress  3 / 3 strict, full`, or the count alone without a limit."""
    count, limit = column["count"], column["wip_limit"]
    if limit is None:
        return f"{column['column']}  {count}"
    state = ", over" if count > limit["limit"] else ", full" if count == limit["limit"] else ""
    return f"{column['column']}  {count} / {limit['limit']} {limit['mode']}{state}"


def _print_tasks(
    tasks: list[dict[str, Any]], count: int, everything: bool, *, status: bool = False
) -> None:
    shown = tasks if everything else tasks[:CARDS]
    for task in shown:
        where = f"[{task['status']}] " if status else ""
        print(f"  {task['id']}  {where}{one_line(task['title'], TITLE_WIDTH)}")
    if count > len(shown):
        print(f"  … {count - len(shown)} more")


def register(commands: Commands) -> None:
    listed = add_verb(
        commands,
        "tasks",
        "list tasks, move one on its board, route one to an agent, or coordinate one",
        tasks,
    )
    listed.add_argument(
        "action", nargs="?", choices=["list", "move", "route", "coordinate"], default="list"
    )
    listed.add_argument("id", nargs="?", help="move, route, coordinate: the task's id")
    listed.add_argument(
        "column", nargs="?", choices=COLUMNS, help="move: the board column it goes to"
    )
    listed.add_argument("--assign", metavar="WHO", help="move: who takes it (through ready)")
    listed.add_argument("--reason", help="move: why, for its audit trail")
    listed.add_argument("--status", help="list: only this status")
    listed.add_argument(
        "--strategy",
        choices=[strategy.value for strategy in AssignmentStrategy],
        help="route: how to choose the agent",
    )
    listed.add_argument("--role", help="route: the agents' role")
    listed.add_argument(
        "--skill", action="append", help="route: a skill the agent needs (repeatable)"
    )
    listed.add_argument("--agent", help="route: manual's agent, or hierarchical's manager")
    coordinations.add_coordinate_options(listed)

    kanban = add_verb(
        commands,
        "board",
        "a project's Kanban board: its columns, counts against WIP limits, and tasks",
        board,
    )
    kanban.add_argument("project", help="the project")
    kanban.add_argument(
        "--limit",
        nargs=2,
        metavar=("COLUMN", "N"),
        help="first set the column's WIP limit to N (strict: a move past it is refused)",
    )
    kanban.add_argument(
        "--advisory", action="store_true", help="with --limit: past it, moves are only noted"
    )
    kanban.add_argument(
        "--no-limit", choices=COLUMNS, metavar="COLUMN", help="first remove its WIP limit"
    )
    kanban.add_argument(
        "--all", action="store_true", help=f"every task shown, not the first {CARDS}"
    )
