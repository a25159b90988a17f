"""Agents from the command line: `agents` lists them, `agents create FILE` makes one from a
YAML or JSON file and prints the server's warnings about it."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.client.arguments import load_file
from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages
from app.client.output import print_table


def agents(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "create":
        if not args.file:
            raise ClientError("say which file: loopwright agents create agent.yaml", Exit.USAGE)
        created = client.post("/v1/agents", load_file(Path(args.file)))
        print(f"agent {created['id']} ({created['name']})")
        for warning in created.get("warnings") or []:
            print(f"warning: {warning}")
        return Exit.COMPLETED
    rows = [
        (
            a["id"],
            a["name"],
            f"{a['model']['provider']}/{a['model']['name']}",
            ", ".join(a["tools"]),
        )
        for a in all_pages(client, "/v1/agents")
    ]
    print_table(rows, ("AGENT", "NAME", "MODEL", "TOOLS"))
    return Exit.COMPLETED


def register(commands: Commands) -> None:
    parser = add_verb(
        commands, "agents", "list agents, or create one from a YAML or JSON file", agents
    )
    parser.add_argument("action", nargs="?", choices=["list", "create"], default="list")
    parser.add_argument("file", nargs="?", help="create: the agent's file")
