"""A CLI resource defined outside `app/`: `lane NAME` prints who holds a lane and who waits
behind it. `python -m tests.client.lane_cli ARGS` is `loopwright ARGS` with this resource
beside the built-in ones, as a new resource in `app/<domain>/cli.py` would be."""

from __future__ import annotations

import argparse
import sys
from urllib.parse import quote

from app.cli import RESOURCES, main
from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client
from app.client.output import print_table


def lane(args: argparse.Namespace, client: Client) -> Exit:
    found = client.get(f"/v1/lanes/{quote(args.name, safe='/')}")
    holder = found["active"]
    held = f"held by {holder['id']}" if holder else "free"
    print(f"lane {found['lane']}: {held}, {len(found['queued'])} queued")
    rows = [(run["id"], run["status"], run["not_before"] or "") for run in found["queued"]]
    print_table(rows, ("RUN", "STATUS", "NOT BEFORE"))
    return Exit.COMPLETED


def register(commands: Commands) -> None:
    parser = add_verb(commands, "lane", "who holds a lane and who waits behind it", lane)
    parser.add_argument("name", help="the lane")


if __name__ == "__main__":
    main(sys.argv[1:], resources=(*RESOURCES, sys.modules[__name__]))
