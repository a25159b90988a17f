"""Approvals from the command line: `approvals` lists them (the pending ones by default),
`approvals approve ID` and `approvals reject ID --reason WHY` decide one."""

from __future__ import annotations

import argparse

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages
from app.client.output import one_line, print_table


def approvals(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "approve":
        decided = client.post(f"/v1/approvals/{args.id}/approve", {"comment": args.comment})
    elif args.action == "reject":
        if not args.reason:
            raise ClientError("a rejection needs --reason", Exit.USAGE)
        decided = client.post(f"/v1/approvals/{args.id}/reject", {"reason": args.reason})
    else:
        items = all_pages(client, "/v1/approvals", status=args.status)
        rows = [
            (
                a["id"],
                a["kind"],
                a["status"],
                a.get("run_id") or a.get("task_id") or "",
                one_line(a.get("summary") or "", 70),
            )
            for a in items
        ]
        print_table(rows, ("APPROVAL", "KIND", "STATUS", "FOR", "SUMMARY"))
        return Exit.COMPLETED
    print(f"approval {decided['id']}: {decided['status']}")
    return Exit.COMPLETED


def register(commands: Commands) -> None:
    parser = add_verb(commands, "approvals", "list, approve or reject approvals", approvals)
    parser.add_argument("action", nargs="?", choices=["list", "approve", "reject"], default="list")
    parser.add_argument("id", nargs="?", help="approval id (approve, reject)")
    parser.add_argument("--status", default="pending", help="list: this status (default pending)")
    parser.add_argument("--comment", help="approve: a comment")
    parser.add_argument("--reason", help="reject: why (required)")
