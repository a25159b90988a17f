"""A destructive call always waits for a person's approval unless the agent lists its tool
in `auto_approve`, whatever the tool says of its idempotency or of approvals; the tool
catalogue says so."""

from __future__ import annotations

from typing import Any

import pytest

from app.runs.schemas.tools import ToolApproval
from app.runs.tools.base import define_tool
from app.runs.tools.registry import describe


async def _noop(context: Any, arguments: dict[str, Any]) -> str:
    return ""


def _tool(**options: Any) -> Any:
    return define_tool("wipe", "Wipes things.", {"type": "object"}, _noop, **options)


# (options, auto-approved, needs approval)
RULES = [
    ({}, False, True),  # the defaults: side-effecting and destructive
    ({}, True, False),
    ({"idempotent": True}, False, True),  # destroying twice is still destroying
    ({"idempotent": True}, True, False),
    ({"requires_approval": False}, False, True),  # the tool cannot waive it
    ({"requires_approval": False}, True, False),
    ({"requires_approval": True}, True, True),  # a tool that always asks still asks
    ({"idempotent": True, "destructive": False}, False, False),
    ({"destructive": False}, False, True),  # not destructive, but a side effect
    ({"destructive": False}, True, False),
    ({"destructive": False, "requires_approval": False}, False, False),
    ({"destructive": lambda a: a.get("hard", False), "idempotent": True}, False, False),
]


@pytest.mark.parametrize(("options", "auto", "needed"), RULES)
def test_who_must_approve_a_call(options: dict[str, Any], auto: bool, needed: bool) -> None:
    tool = _tool(**options)
    assert tool.needs_approval({}, ["wipe"] if auto else []) is needed


def test_a_per_call_rule_decides_each_call_and_fails_closed() -> None:
    def hard(arguments: dict[str, Any]) -> bool:
        return bool(arguments["hard"])

    tool = _tool(destructive=hard, idempotent=True)
    assert tool.needs_approval({"hard": True}, [])
    assert not tool.needs_approval({"hard": False}, [])
    assert tool.needs_approval({}, [])  # the rule cannot read the call: destructive


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"idempotent": True}, ToolApproval.SIDE_EFFECTS),
        ({"idempotent": True, "destructive": False}, ToolApproval.NEVER),
        ({"requires_approval": False}, ToolApproval.SIDE_EFFECTS),
        ({"requires_approval": False, "destructive": False}, ToolApproval.NEVER),
        ({"requires_approval": True}, ToolApproval.ALWAYS),
    ],
)
def test_the_catalogue_shows_the_rule(options: dict[str, Any], shown: ToolApproval) -> None:
    assert describe(_tool(**options)).approval is shown
