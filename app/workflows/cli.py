"""Workflow definitions from the command line: `workflows` lists them (with their kind and
project), `workflows templates` the built-in templates with their variables, and
`workflows instantiate TEMPLATE [--name N] [--project P] [--var NAME=VALUE ...]` makes a
definition from one and prints its id (alone on stdout, for scripts)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages, segment
from app.client.output import one_line, print_table

DESCRIPTION_WIDTH = 72
_INTEGER = re.compile(r"-?[0-9]+")


def workflows(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "templates":
        return _templates(client)
    if args.action == "instantiate":
        return _instantiate(args, client)
    if args.template or args.name or args.project or args.var:
        raise ClientError("a template, --name, --project and --var go with instantiate", Exit.USAGE)
    rows = [
        (w["id"], w["kind"], w["project"] or "", str(w["version"]), w["name"])
        for w in all_pages(client, "/v1/workflows")
    ]
    print_table(rows, ("WORKFLOW", "KIND", "PROJECT", "VERSION", "NAME"))
    return Exit.COMPLETED


def _templates(client: Client) -> Exit:
    """Each template: its name, kind and description, then a line per variable as it is
    given to `instantiate` (`--var name=default`) with its type, bounds and meaning."""
    for number, template in enumerate(client.get("/v1/workflow-templates")):
        if number:
            print()
        print(f"{template['name']}  ({template['kind']})")
        print(f"  {one_line(template['description'], DESCRIPTION_WIDTH)}")
        for variable in template["variables"]:
            print(f"  --var {variable['name']}={variable['default']}  {_kind_of(variable)}")
            print(f"      {one_line(variable['description'], DESCRIPTION_WIDTH)}")
    return Exit.COMPLETED


def _kind_of(variable: dict[str, Any]) -> str:
    """`int, 1 to 90`; `string, up to 120 characters`."""
    low, high = variable["minimum"], variable["maximum"]
    if variable["type"] == "int":
        if low is None and high is None:
            return "int"
        return f"int, {'…' if low is None else low} to {'…' if high is None else high}"
    return "string" if high is None else f"string, up to {high} characters"


def _instantiate(args: argparse.Namespace, client: Client) -> Exit:
    if not args.template:
        raise ClientError(
            "say which template: loopwright workflows instantiate TEMPLATE "
            "(see `loopwright workflows templates`)",
            Exit.USAGE,
        )
    path = f"/v1/workflow-templates/{segment(args.template)}"
    template = client.get(path)
    types = {v["name"]: v["type"] for v in template["variables"]}
    body: dict[str, Any] = {"variables": _variables(args.var or [], types)}
    if args.name:
        body["name"] = args.name
    if args.project:
        body["project"] = args.project
    made = client.post(f"{path}/instantiate", body)
    print(made["id"])
    return Exit.COMPLETED


def _variables(pairs: list[str], types: dict[str, str]) -> dict[str, int | str]:
    """`NAME=VALUE` pairs, an `int` variable's value as a number when it reads as one; the
    server judges the rest (an unknown name, a value out of bounds), naming the variable."""
    values: dict[str, int | str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ClientError(f"--var {pair!r}: write it NAME=VALUE", Exit.USAGE)
        number = value.strip()
        is_int = _INTEGER.fullmatch(number) is not None
        values[name] = int(number) if types.get(name) == "int" and is_int else value
    return values


def register(commands: Commands) -> None:
    parser = add_verb(
        commands,
        "workflows",
        "list workflow definitions, the built-in templates, or make a definition from one",
        workflows,
    )
    parser.add_argument(
        "action", nargs="?", choices=["list", "templates", "instantiate"], default="list"
    )
    parser.add_argument("template", nargs="?", help="instantiate: the template's name")
    parser.add_argument(
        "--name", help="instantiate: the definition's name (default: the template's)"
    )
    parser.add_argument(
        "--project",
        help="instantiate: the project it works in (its board gets the template's WIP limits "
        "where a column has none; agile_kanban opens its first sprint)",
    )
    parser.add_argument(
        "--var",
        action="append",
        metavar="NAME=VALUE",
        help="instantiate: a template variable (repeatable; see `workflows templates`)",
    )
