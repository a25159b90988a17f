"""Tools for the chaos tests, loaded into real worker processes as a plugin
(`LOOPWRIGHT_TOOLS__PLUGINS=tests.support.chaos_tools:tools`).

`charge_card` is side-effecting. An effect is known by its run and a marker, `effect`, that
the agent's script puts in the call's input (`"charge-1"`: the script's call at position
1; without one, the input itself), so it is deterministic: whatever tool-call id the model
made up for it (a model asked again makes a new id for the same call). Each execution
records, in tables the service does not manage:
- `chaos_calls` (when the test created it, `CALLS_DDL`): that it began, in which process
  and when, before the effect;
- `chaos_ledger` (`LEDGER_DDL`): the effect itself, one row per execution; the tests count
  these.
A kill between the two leaves a call begun and no effect; one after the effect, an effect
whose result the service never heard of. `hold_s` in the input holds the call just after
its effect (a window to freeze or kill the worker in).

`look_up` is idempotent and does nothing lasting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from typing import Any

import asyncpg

from app.runs.tools.base import Tool, ToolContext, define_tool

LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS chaos_ledger ("
    " id bigserial PRIMARY KEY, run_id text NOT NULL, effect text NOT NULL,"
    " tool_call_id text NOT NULL, idempotency_key text NOT NULL, pid integer NOT NULL,"
    " at timestamptz NOT NULL DEFAULT clock_timestamp())"
)
CALLS_DDL = (
    "CREATE TABLE IF NOT EXISTS chaos_calls ("
    " id bigserial PRIMARY KEY, run_id text NOT NULL, effect text NOT NULL,"
    " tool_call_id text NOT NULL, pid integer NOT NULL,"
    " began_at timestamptz NOT NULL DEFAULT clock_timestamp())"
)


def effect_of(arguments: dict[str, Any]) -> str:
    """The deterministic name of a call's effect within its run."""
    marker = arguments.get("effect")
    return marker if isinstance(marker, str) else json.dumps(arguments, sort_keys=True)


_pool: asyncpg.Pool | None = None


async def _ledger() -> asyncpg.Pool:
    """This process's connections to the ledger (a call begins without connecting, so a
    kill soon after the call's start finds it begun)."""
    global _pool
    if _pool is None:
        _pool = await asyncpg.create_pool(os.environ["CHAOS_LEDGER_DSN"], min_size=1, max_size=8)
    return _pool


async def _charge(context: ToolContext, arguments: dict[str, Any]) -> str:
    effect = effect_of(arguments)
    async with (await _ledger()).acquire() as conn:
        with contextlib.suppress(asyncpg.UndefinedTableError):  # not asked for
            await conn.execute(
                "INSERT INTO chaos_calls (run_id, effect, tool_call_id, pid)"
                " VALUES ($1, $2, $3, $4)",
                context.run_id,
                effect,
                context.tool_call_id,
                os.getpid(),
            )
        await asyncio.sleep(random.uniform(0.0, 0.1))  # a window for a kill before the effect
        await conn.execute(
            "INSERT INTO chaos_ledger (run_id, effect, tool_call_id, idempotency_key, pid)"
            " VALUES ($1, $2, $3, $4, $5)",
            context.run_id,
            effect,
            context.tool_call_id,
            context.idempotency_key,
            os.getpid(),
        )
    await asyncio.sleep(random.uniform(0.0, 0.2))  # and one after it
    await asyncio.sleep(float(arguments.get("hold_s", 0)))
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
