"""Costs from the command line: `costs` sums what LLM calls cost between two days by agent,
project, task, model, day or month; `budgets` lists the budgets with where each stands in
its current period."""

from __future__ import annotations

import argparse

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, all_pages
from app.client.output import print_table, usd


def costs(args: argparse.Namespace, client: Client) -> Exit:
    """What LLM calls cost between two days, one line per agent, project, model or day,
    and the total."""
    report = client.get("/v1/costs", group_by=args.by, start=args.start, end=args.end)
    names = (
        {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")} if args.by == "agent" else {}
    )
    rows = [
        (
            names.get(line["key"], line["key"]) or "(none)",
            str(line["calls"]),
            str(line["input_tokens"] + line["cache_write_tokens"] + line["cache_read_tokens"]),
            str(line["output_tokens"]),
            # Nothing priced: the cost is not known, not zero.
            usd(line["cost_usd"] if line["calls"] > line["unpriced_calls"] else None),
            str(line["unpriced_calls"] or ""),
        )
        for line in [*report["items"], {"key": "total", **report["total"]}]
    ]
    print(f"{report['start']} to {report['end']} (UTC)")
    print_table(rows, (args.by.upper(), "CALLS", "TOKENS IN", "OUT", "USD", "UNPRICED CALLS"))
    return Exit.COMPLETED


def budgets(args: argparse.Namespace, client: Client) -> Exit:
    """Budgets with where each stands in its current period."""
    names = {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")}
    rows = []
    for b in all_pages(client, "/v1/budgets"):
        now = b["current"]
        subject = names.get(b["subject"], b["subject"]) if b["scope"] == "agent" else b["subject"]
        rows.append(
            (
                b["id"],
                f"{b['scope']} {subject}",
                f"{now['period_start']}..{now['period_end']}",
                usd(b["limit_usd"]),
                usd(now["spent_usd"]),
                usd(now["reserved_usd"]),
                f"{now['spent_percent']:g}%",
            )
        )
    if not rows:
        print("no budgets: runs spend without a limit (POST /v1/budgets sets one)")
        return Exit.COMPLETED
    print_table(rows, ("BUDGET", "FOR", "PERIOD", "LIMIT", "SPENT", "RESERVED", "USED"))
    return Exit.COMPLETED


def register(commands: Commands) -> None:
    report = add_verb(
        commands,
        "costs",
        "what LLM calls cost, by agent, project, task, model, day or month",
        costs,
    )
    report.add_argument(
        "--by",
        choices=["agent", "project", "task", "model", "day", "month"],
        default="agent",
        help="grouping",
    )
    report.add_argument("--start", help="first day, YYYY-MM-DD (default: this month's 1st)")
    report.add_argument("--end", help="last day, included (default: today, UTC)")

    add_verb(commands, "budgets", "budgets, with what each period spent and reserved", budgets)
