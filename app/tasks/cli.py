"""Kanban boards from the command line: `board PROJECT` prints a project's columns (count
against WIP limit, the oldest tasks of each) and sets or removes a column's WIP limit;
`tasks move TASK COLUMN` moves a task to a column."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from app.client.exits import Exit
from app.client.http import Client, ClientError
from app.client.verbs import one_line
from app.core.vocabulary import BoardColumn, WipMode

COLUMNS = [column.value for column in BoardColumn]
TITLE_WIDTH = 60
CARDS = 10  # tasks a column lists; its count has them all


def board(args: argparse.Namespace, client: Client) -> Exit:
    """The board; with `--limit COLUMN N` or `--no-limit COLUMN`, after that change."""
    base = f"/v1/projects/{quote(args.project, safe='')}"
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
