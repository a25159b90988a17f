"""How fast a long run's page opens in the dashboard: a conversation of 1,000 LLM turns
(two scripted runs of 500, written through the workers as `agent_loop.py`'s reads
scenario writes it), then the page of its last run:

- over HTTP: `GET /ui/runs/{id}` (the server's render: the run, its last 50 messages, the
  summary), p50 and p99, and the HTML's size;
- in Debian's Chromium (when installed), a fresh page each time: until `load` (the page and
  its scripts), and until its event stream has replayed the last 200 steps.

The aim: the page usable in under a second on a quiet 2-core machine. A missed aim is
printed as MISSED and does not fail the script; a page that shows the wrong messages does.
Run it from the repository: `python bench/ui_transcript.py` (`--loads`, `--database-url`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import uvicorn
from agent_loop import DEFAULT_SERVER, READ_RUNS, READ_TURNS, Scenario, scratch_database
from agent_loop import w1_scenario as write_conversation
from common import aim_mark, exit_on_bad_checks, log, percentile, verdict
from sqlalchemy import text

from app.core.config import Settings
from app.core.net import listening_socket
from app.db.connection import make_engine
from app.main import create_app

CHROMIUM = Path(os.environ.get("LOOPWRIGHT_CHROMIUM", "/usr/bin/chromium"))
AIM_OPEN_MS = 1_000.0  # p50, in the browser until the stream has replayed
HTTP_READS = 30
WARM_UP = 3


@asynccontextmanager
async def serving(url: str) -> AsyncIterator[str]:
    """The service (no workers: the runs are done) on a free loopback port."""
    settings = Settings.model_validate(
        {"database": {"url": url, "migrate_on_start": False}, "workers": {"enabled": False}}
    )
    app = create_app(settings)
    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the server stopped during start-up")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def http_reads(base: str, path: str) -> tuple[list[float], httpx.Response]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for _ in range(WARM_UP):
            await client.get(path)
        timings = []
        for _ in range(HTTP_READS):
            begun = time.perf_counter()
            response = await client.get(path)
            timings.append(time.perf_counter() - begun)
        return sorted(timings), response


async def browser_loads(
    base: str, run_id: str, last_seq: int, loads: int
) -> tuple[list[float], list[float]]:
    from playwright.async_api import async_playwright

    until_load, until_live = [], []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        for n in range(WARM_UP + loads):
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            page = await context.new_page()
            begun = time.perf_counter()
            await page.goto(f"{base}/ui/runs/{run_id}", wait_until="load")
            loaded = time.perf_counter()
            # The replay is done when the last step's last event is on the timeline.
            await page.locator(f'#timeline li[data-id="{last_seq}"]').wait_for(timeout=30_000)
            if n >= WARM_UP:
                until_load.append(loaded - begun)
                until_live.append(time.perf_counter() - begun)
            await context.close()
        await browser.close()
    return sorted(until_load), sorted(until_live)


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:7.1f} ms"


async def bench(args: argparse.Namespace) -> None:
    async with scratch_database(args.database_url) as (name, url):
        log(f"writing a conversation of {READ_RUNS} runs x {READ_TURNS} turns")
        scenario = Scenario("W1-conv", READ_RUNS, READ_TURNS, 1)
        await write_conversation(url, name, scenario, 0, one_conversation=True)
        engine = make_engine(url, pool_size=1)
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))
            run_id = str(await conn.scalar(text("SELECT max(id) FROM runs")))
            last_seq = int(
                await conn.scalar(
                    text("SELECT max(seq) FROM run_history WHERE run_id = :run"), {"run": run_id}
                )
            )
            messages = await conn.scalar(
                text("SELECT sum(jsonb_array_length(messages)) FROM run_history")
            )
        await engine.dispose()
        log(f"the last run {run_id}; the conversation holds {messages} messages")
        async with serving(url) as base:
            # The floor: a route that reads nothing, over the same client (on loopback an
            # HTTP client's round trip may cost tens of ms by itself).
            floor, _ = await http_reads(base, "/healthz")
            timings, page = await http_reads(base, f"/ui/runs/{run_id}")
            right = page.status_code == 200 and page.text.count('<li class="msg msg-') == 50
            print(f"GET /healthz        p50 {ms(floor, 0.5)}  p99 {ms(floor, 0.99)}  (the floor)")
            print(f"GET /ui/runs/{{id}}  p50 {ms(timings, 0.5)}  p99 {ms(timings, 0.99)}  ", end="")
            size_kb = len(page.content) / 1024
            print(f"{size_kb:.0f} KB of HTML, its last 50 messages: {verdict(right)}")
            if not args.browser:
                print(f"no browser at {CHROMIUM}: `make browser` for the in-browser figures")
                return
            until_load, until_live = await browser_loads(base, run_id, last_seq, args.loads)
            p50 = percentile(until_live, 0.5) * 1000
            print(f"chromium: until load   p50 {ms(until_load, 0.5)}  p99 {ms(until_load, 0.99)}")
            print(
                f"chromium: until live   p50 {ms(until_live, 0.5)}  p99 {ms(until_live, 0.99)}  "
                f"aim < {AIM_OPEN_MS:.0f} ms: {aim_mark(p50 < AIM_OPEN_MS)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_SERVER),
        help="a PostgreSQL server; a scratch database is created on it and dropped after",
    )
    parser.add_argument("--loads", type=int, default=10, help="page loads in the browser")
    args = parser.parse_args()
    args.browser = CHROMIUM.exists()
    asyncio.run(bench(args))
    exit_on_bad_checks()


if __name__ == "__main__":
    main()
