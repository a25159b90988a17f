"""Triggers from the command line: `triggers` lists them, `triggers fire ID` sends a
webhook trigger a test delivery signed as a sender would sign it (and `--follow`s the run
it started), and `schedules` lists the schedule triggers with their next fire times."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages
from app.client.output import print_table
from app.core.signatures import SIGNATURE_HEADER, signature_header
from app.runs.cli.follow import follow_here

SECRET_ENV = "LOOPWRIGHT_TRIGGER_SECRET"


def triggers(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "fire":
        return _fire(args, client)
    rows = [
        (
            t["id"],
            t["kind"],
            t["name"],
            "yes" if t["enabled"] else "no",
            _target(t["target"]),
            t["next_fire_at"] or "",
            t["last_fired_at"] or "",
        )
        for t in all_pages(client, "/v1/triggers", kind=args.kind)
    ]
    print_table(rows, ("TRIGGER", "KIND", "NAME", "ENABLED", "TARGET", "NEXT FIRE", "LAST FIRED"))
    return Exit.COMPLETED


def _target(target: dict[str, Any]) -> str:
    if target["kind"] == "run":
        return f"run of {target['agent_id']}"
    return f"workflow {target['workflow_id']}"


def _fire(args: argparse.Namespace, client: Client) -> Exit:
    """A test delivery to a webhook trigger, signed as a sender would sign it."""
    if not args.id:
        raise ClientError("say which trigger: loopwright triggers fire TRIGGER_ID", Exit.USAGE)
    secret = args.secret or os.environ.get(SECRET_ENV)
    if not secret:
        raise ClientError(
            f"the trigger's secret signs the delivery: pass --secret or set {SECRET_ENV}",
            Exit.USAGE,
        )
    try:
        payload = json.loads(args.payload)
    except ValueError as exc:
        raise ClientError(f"--payload is not JSON: {exc}", Exit.USAGE) from exc
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature_header(secret, int(time.time()), body),
    }
    if args.delivery:
        headers["Loopwright-Delivery"] = args.delivery
    answer = client.post_raw(f"/v1/hooks/{args.id}", body, headers)
    started = answer["run_id"] or answer["execution_id"]
    what = f"run {started}" if answer["run_id"] else f"execution {started}"
    if answer["status"] == "started":
        print(f"fire {answer['fire_id']}: started {what}")
    else:
        print(f"fire {answer['fire_id']}: {answer['status']}: {answer['error']}")
        return Exit.FAILED
    if args.follow and answer["run_id"]:
        return follow_here(client, answer["run_id"])
    return Exit.COMPLETED


def schedules(args: argparse.Namespace, client: Client) -> Exit:
    """Schedule triggers, each with its next fire times (as the server computed them) in
    its own zone, one a line; a paused (disabled) schedule has none."""
    rows: list[tuple[str, ...]] = []
    for t in all_pages(client, "/v1/triggers", kind="schedule"):
        config = t["config"]
        when = config["cron"] or f"every {every(config['interval_s'])}"
        times = [local(at, config["timezone"]) for at in t["next_fire_times"] or []]
        first = times[0] if times else ("paused" if not t["enabled"] else "")
        head = (t["id"], t["name"], when, config["timezone"], "yes" if t["enabled"] else "no")
        rows.append((*head, first))
        rows += [("",) * len(head) + (at,) for at in times[1:]]
    print_table(rows, ("TRIGGER", "NAME", "SCHEDULE", "ZONE", "ENABLED", "NEXT FIRES"))
    return Exit.COMPLETED


def every(seconds: int) -> str:
    """An interval in short: `1h30m`, `2d`, `90s` is `1m30s`."""
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def local(at: str, zone: str) -> str:
    """A fire time in the schedule's zone with its abbreviation (`2026-03-29 03:00 CEST`),
    or as the server sent it if this machine does not know the zone."""
    from datetime import datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return datetime.fromisoformat(at).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
    except (ZoneInfoNotFoundError, ValueError):
        return at


def register(commands: Commands) -> None:
    add_verb(
        commands,
        "schedules",
        "schedule triggers: cron or interval, zone, enabled, and their next fire times",
        schedules,
    )

    parser = add_verb(
        commands,
        "triggers",
        "list triggers, or fire a webhook trigger with a signed test delivery",
        triggers,
    )
    parser.add_argument("action", nargs="?", choices=["list", "fire"], default="list")
    parser.add_argument("id", nargs="?", help="fire: the webhook trigger's id")
    parser.add_argument(
        "--kind", choices=["webhook", "schedule", "chain"], help="list: only this kind"
    )
    parser.add_argument("--payload", default="{}", help="fire: the JSON payload (default {})")
    parser.add_argument("--secret", help=f"fire: the trigger's secret (default: ${SECRET_ENV})")
    parser.add_argument("--delivery", help="fire: a delivery id (a repeat starts nothing)")
    parser.add_argument("--follow", action="store_true", help="fire: then follow the run")
