"""Tools for the database-outage test, loaded into a real worker process as a plugin
(`LOOPWRIGHT_TOOLS__PLUGINS=tests.support.outage_tools:tools`).

`charge` is side-effecting: each execution inserts a row into `outage_effects`, keyed by
the run and the `step` its arguments name (the script's, not the model's call id), on a
connection named `effect-ledger` that the outage leaves alone, so the test can count how
many times each effect really happened. Its answer comes back a moment after the effect,
as a remote's would; with `"hold": true` only once the test has started the outage (a row
in `outage_signals`), so the call is surely in flight when the database goes away.
`look_up` is idempotent and does nothing lasting."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import asyncpg

from app.runs.tools.base import Tool, ToolContext, define_tool

EFFECTS_DDL = (
    "CREATE TABLE IF NOT EXISTS outage_effects ("
    " id bigserial PRIMARY KEY, run_id text NOT NULL, step int NOT NULL,"
    " at timestamptz NOT NULL DEFAULT clock_timestamp());"
    "CREATE TABLE IF NOT EXISTS outage_signals (name text PRIMARY KEY)"
)
OUTAGE_ON = "INSERT INTO outage_signals VALUES ('outage_on')"
HOLD_LIMIT_S = 30.0  # a held call gives up waiting for the signal (the test failed)
LEDGER_APPLICATION = "effect-ledger"  # connections the outage must spare


async def _charge(context: ToolContext, arguments: dict[str, Any]) -> str:
    conn = await asyncpg.connect(
        os.environ["OUTAGE_EFFECTS_DSN"], server_settings={"application_name": LEDGER_APPLICATION}
    )
    try:
        await conn.execute(
            "INSERT INTO outage_effects (run_id, step) VALUES ($1, $2)",
            context.run_id,
            int(arguments["step"]),
        )
        if arguments.get("hold"):
            async with asyncio.timeout(HOLD_LIMIT_S):
                # The signal is a row another process writes: nothing to wait on but a read.
                while not await conn.fetchval("SELECT 1 FROM outage_signals"):  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
    finally:
        await conn.close()
    await asyncio.sleep(0.1)  # the remote's answer takes a moment to come back
    return json.dumps({"charged": arguments["step"]})


async def _look_up(context: ToolContext, arguments: dict[str, Any]) -> str:
    return json.dumps({"found": arguments.get("q", "")})


def tools() -> list[Tool]:
    return [
        define_tool("charge", "Charge a card (side effect).", {"type": "object"}, _charge),
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
