"""Tools for the chaos test, loaded into real worker processes as a plugin
(`LOOPWRIGHT_TOOLS__PLUGINS=tests.support.chaos_tools:tools`).

`charge_card` is side-effecting: each execution inserts a row into `chaos_ledger`, a table
the service does not manage, so the test can count how many times each call really ran.
`look_up` is idempotent and does nothing lasting."""

from __future__ import annotations

import asyncio
import json
import os
import random
from typing import Any

import asyncpg

from app.loop.tools.base import Tool, ToolContext, define_tool

LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS chaos_ledger ("
    " id bigserial PRIMARY KEY, run_id text NOT NULL, tool_call_id text NOT NULL,"
    " idempotency_key text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
)


async def _charge(context: ToolContext, arguments: dict[str, Any]) -> str:
    await asyncio.sleep(random.uniform(0.0, 0.05))  # a window for a kill before the effect
    conn = await asyncpg.connect(os.environ["CHAOS_LEDGER_DSN"])
    try:
        await conn.execute(
            "INSERT INTO chaos_ledger (run_id, tool_call_id, idempotency_key) VALUES ($1, $2, $3)",
            context.run_id,
            context.tool_call_id,
            context.idempotency_key,
        )
    finally:
        await conn.close()
    await asyncio.sleep(random.uniform(0.0, 0.05))  # and one after it
    return json.dumps({"charged": arguments.get("amount", 1)})


async def _look_up(context: ToolContext, arguments: dict[str, Any]) -> str:
    await asyncio.sleep(random.uniform(0.0, 0.03))
    return json.dumps({"found": arguments.get("q", "")})


def tools() -> list[Tool]:
    return [
        define_tool("charge_card", "Charge a card (side effect).", {"type": "object"}, _charge),
        define_tool(
            "look_up",
            "Look something up (safe to repeat).",
            {"type": "object"},
            _look_up,
            idempotent=True,
            retries=True,
            destructive=False,
        ),
    ]
