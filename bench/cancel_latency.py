"""Cancel latency: how long a person waits between pressing cancel on a run whose model
call is under way and the run being `cancelled`.

Each run's agent has one scripted turn that takes `--turn-s` (20 s by default), so a
cancel that waited for the call would take that long. The bench starts `--runs` runs,
`--concurrency` at a time, waits until each has started (its model call begins then),
cancels it, and times from sending `POST /v1/runs/{id}/cancel` to `GET …/wait` answering
`cancelled`. Two set-ups: the API and the workers in one `loopwright serve` process, and
the API and a `loopwright worker` in processes of their own (the cancel reaches the
worker through the database's NOTIFY). Aim: p99 under 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from common import (
    admin,
    exit_on_bad_checks,
    free_port,
    log,
    percentile,
    verdict,
    wait_ready,
    with_database,
)

from app.db import migrate
from app.db.connection import make_engine

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
AIM_P99_MS = 200.0


async def _cancel_one(http: httpx.AsyncClient, agent_id: str) -> float:
    run = (await http.post("/v1/runs", json={"agent_id": agent_id, "input": "go"})).json()
    path = f"/v1/runs/{run['id']}"
    async with http.stream("GET", f"{path}/events") as events:
        async for line in events.aiter_lines():
            if line == "event: agent_run.started":
                break  # the model call begins now
    await asyncio.sleep(0.05)  # well inside the model call
    began = time.monotonic()
    await http.post(f"{path}/cancel")
    final = (await http.get(f"{path}/wait", params={"timeout_s": 60})).json()
    waited = time.monotonic() - began
    if final["status"] != "cancelled":
        raise RuntimeError(f"run {run['id']} ended {final['status']}, not cancelled")
    return waited


async def _measure(base_url: str, args: argparse.Namespace) -> list[float]:
    turn = {"text": "too late", "latency_ms": int(args.turn_s * 1000)}
    agent = {
        "name": "slow-thinker",
        "tools": [],
        "model": {"provider": "scripted", "name": "scripted", "script": [turn]},
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=90) as http:
        agent_id = (await http.post("/v1/agents", json=agent)).json()["id"]
        gate = asyncio.Semaphore(args.concurrency)

        async def one() -> float:
            async with gate:
                return await _cancel_one(http, agent_id)

        return sorted(await asyncio.gather(*(one() for _ in range(args.runs))))


async def _processes(url: str, apart: bool) -> tuple[str, list[asyncio.subprocess.Process]]:
    port = free_port()
    env = {
        **os.environ,
        "LOOPWRIGHT_DATABASE__URL": url,
        "LOOPWRIGHT_DATABASE__MIGRATE_ON_START": "false",
        "LOOPWRIGHT_LOG_LEVEL": "WARNING",
    }
    loopwright = str(Path(sys.executable).with_name("loopwright"))
    api_env = {**env, "LOOPWRIGHT_WORKERS__ENABLED": "false"} if apart else env
    api = await asyncio.create_subprocess_exec(
        loopwright, "serve", "--port", str(port), env=api_env
    )
    processes = [api]
    if apart:
        processes.append(await asyncio.create_subprocess_exec(loopwright, "worker", env=env))
    base_url = f"http://127.0.0.1:{port}"
    await wait_ready(base_url, api)
    return base_url, processes


async def _stop(processes: Sequence[asyncio.subprocess.Process]) -> None:
    for process in processes:
        if process.returncode is None:
            process.terminate()
    for process in processes:
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"runs": args.runs, "concurrency": args.concurrency}
    for setup, apart in (("one_process", False), ("api_and_worker_apart", True)):
        name = f"lw_bench_cancel_{secrets.token_hex(4)}"
        await admin(args.database_url, f'CREATE DATABASE "{name}"')
        url = with_database(args.database_url, name)
        engine = make_engine(url)
        processes: list[asyncio.subprocess.Process] = []
        try:
            await migrate.upgrade(engine)
            base_url, processes = await _processes(url, apart)
            waited = await _measure(base_url, args)
        finally:
            await _stop(processes)
            await engine.dispose()
            await admin(args.database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        report[setup] = {
            "p50_ms": round(percentile(waited, 0.50) * 1000, 1),
            "p99_ms": round(percentile(waited, 0.99) * 1000, 1),
            "max_ms": round(waited[-1] * 1000, 1),
        }
    return report


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_SERVER),
        help="a PostgreSQL server; a scratch database is created on it and dropped after",
    )
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--turn-s", type=float, default=20.0, help="the model call's length")
    args = parser.parse_args(argv)
    log(f"cancel latency: {args.runs} runs, {args.concurrency} at a time, {args.turn_s:g} s turns")
    report = asyncio.run(bench(args))
    for setup in ("one_process", "api_and_worker_apart"):
        figures = report[setup]
        print(
            f"{setup:>22}: cancel→cancelled p50 {figures['p50_ms']} ms, "
            f"p99 {figures['p99_ms']} ms, max {figures['max_ms']} ms "
            f"(aim p99 < {AIM_P99_MS:g} ms) {verdict(figures['p99_ms'] < AIM_P99_MS)}"
        )
    exit_on_bad_checks()


if __name__ == "__main__":
    main()
