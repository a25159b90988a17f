"""The tools agents may use, from the command line: `tools` prints each with how it may be
called and its inputs (`--schemas`: their full JSON schemas)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client
from app.client.output import one_line

_IDEMPOTENCY = {
    "always": "idempotent",
    "never": "side-effecting",
    "by_input": "idempotent or not by its input",
}
_APPROVAL = {
    "always": "always asks a person",
    "never": "never asks a person",
    "side_effects": "a side-effecting call asks a person unless the agent auto-approves it",
}


def tools(args: argparse.Namespace, client: Client) -> Exit:
    for tool in client.get("/v1/tools"):
        print(f"{tool['name']}: {_IDEMPOTENCY[tool['idempotency']]}; {_APPROVAL[tool['approval']]}")
        print(f"  {one_line(tool['description'], 200)}")
        schema = tool["input_schema"]
        if args.schemas:
            print("  " + json.dumps(schema, indent=2).replace("\n", "\n  "))
            continue
        required = set(schema.get("required", []))
        fields = [
            f"{name}{'' if name in required else '?'}: {_type(prop)}"
            for name, prop in schema.get("properties", {}).items()
        ]
        print(f"  input: {{{', '.join(fields)}}}")
    return Exit.COMPLETED


def _type(prop: dict[str, Any]) -> str:
    """A property's JSON type, in short: `string`, `integer|null`, `any`."""
    if "type" in prop:
        kind = prop["type"]
        return "|".join(kind) if isinstance(kind, list) else str(kind)
    variants = [_type(v) for v in prop.get("anyOf", [])]
    return "|".join(variants) if variants else "any"


def register(commands: Commands) -> None:
    listed = add_verb(commands, "tools", "the tools agents may use, with their inputs", tools)
    listed.add_argument("--schemas", action="store_true", help="print full input schemas")
