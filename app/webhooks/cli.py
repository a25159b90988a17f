"""Webhooks from the command line: `webhooks` lists them, `webhooks deliveries ID` prints a
webhook's delivery log (newest first), `webhooks redeliver ID DELIVERY` sends one again."""

from __future__ import annotations

import argparse

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages
from app.client.output import one_line, print_table


def webhooks(args: argparse.Namespace, client: Client) -> Exit:
    """List webhooks; a webhook's delivery log, newest first; redeliver one delivery."""
    if args.action == "list":
        rows = [
            (w["id"], "on" if w["enabled"] else "off", w["url"], ", ".join(w["event_types"]))
            for w in all_pages(client, "/v1/webhooks")
        ]
        print_table(rows, ("WEBHOOK", "ENABLED", "URL", "EVENTS"))
        return Exit.COMPLETED
    if not args.webhook:
        raise ClientError(
            f"say which webhook: loopwright webhooks {args.action} WEBHOOK_ID", Exit.USAGE
        )
    base = f"/v1/webhooks/{args.webhook}/deliveries"
    if args.action == "redeliver":
        if not args.delivery:
            raise ClientError("say which delivery: … redeliver WEBHOOK_ID DELIVERY_ID", Exit.USAGE)
        sent = client.post(f"{base}/{args.delivery}/redeliver", {})
        print(f"delivery {sent['id']}: {sent['status']}")
        return Exit.COMPLETED
    page = client.get(base, status=args.status, limit=args.limit)
    entries = [
        (
            d["id"],
            d["event_type"],
            d["status"],
            str(d["attempts"]),
            str(d["last_status_code"] or "") or one_line(d["last_error"] or "", 40),
            "" if d["last_latency_ms"] is None else f"{d['last_latency_ms']} ms",
            d["created_at"][:19].replace("T", " "),
        )
        for d in page["items"]
    ]
    print_table(
        entries, ("DELIVERY", "EVENT", "STATUS", "ATTEMPTS", "LAST", "LATENCY", "CREATED (UTC)")
    )
    return Exit.COMPLETED


def register(commands: Commands) -> None:
    parser = add_verb(
        commands, "webhooks", "list webhooks, a webhook's deliveries, or redeliver one", webhooks
    )
    parser.add_argument(
        "action", nargs="?", choices=["list", "deliveries", "redeliver"], default="list"
    )
    parser.add_argument("webhook", nargs="?", help="webhook id (deliveries, redeliver)")
    parser.add_argument("delivery", nargs="?", help="delivery id (redeliver)")
    parser.add_argument(
        "--status", help="deliveries: only this status (pending, succeeded, dead_letter)"
    )
    parser.add_argument("--limit", type=int, default=20, help="deliveries: how many (default 20)")
