"""A side-effecting http_request cut short between its ledger start and its result: to a
host the operator lists as honouring `Idempotency-Key`, the resumed run sends it again with
the same key and completes; to any other host the run halts `resume_unsafe`, as before.

The remote is a real HTTP server on loopback that deduplicates by key, like a payments
API. Its first request is held (the effect is made, the answer not yet back) while the
worker's lease runs out; the reconciler times the run out and another worker resumes it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import uvicorn
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.core.net import listening_socket
from app.core.states import RunStatus
from app.runs.engine.reconciler import Reconciler
from app.runs.store import history
from app.runs.tools.base import idempotency_key
from app.runs.tools.http_request import HttpToolPolicy, make_http_request_tool
from tests.support.runs import SAFETY_S, Harness, call, say


@dataclass
class Remote:
    """A remote that honours Idempotency-Key: one charge per key, a repeat is answered
    with the first response. Its first request is held until `release`."""

    url: str = ""
    port: int = 0
    keys: list[str] = field(default_factory=list)  # of every request, in order
    charges: dict[str, int] = field(default_factory=dict)  # key -> charge number
    first_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def charge(self, request: Request) -> Response:
        key = request.headers["idempotency-key"]
        self.keys.append(key)
        number = self.charges.setdefault(key, len(self.charges) + 1)
        if len(self.keys) == 1:
            self.first_arrived.set()
            await self.release.wait()  # the effect is made; the answer is late
        return JSONResponse({"charge": number})


@asynccontextmanager
async def serving() -> AsyncIterator[Remote]:
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    remote = Remote(url=f"http://127.0.0.1:{port}", port=port)
    app = Starlette(routes=[Route("/charges", remote.charge, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # uvicorn has no start-up event to wait on
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield remote
    finally:
        remote.release.set()
        server.should_exit = True
        await task
        sock.close()


@pytest.fixture
async def remote() -> AsyncIterator[Remote]:
    async with serving() as running:
        yield running


@pytest.mark.parametrize("honoured", [True, False], ids=["listed-host", "unlisted-host"])
async def test_a_call_cut_short_is_sent_again_with_its_key_only_to_a_host_that_honours_it(
    clean_db: AsyncEngine, remote: Remote, honoured: bool
) -> None:
    policy = HttpToolPolicy(
        allowed_networks=("127.0.0.0/8",),
        idempotency_key_hosts=(f"127.0.0.1:{remote.port}",) if honoured else (),
    )
    async with Harness.open(clean_db, extra_tools=[make_http_request_tool(policy)]) as h:
        agent = await h.agent(
            call("http_request", url=f"{remote.url}/charges", method="POST", body="5"),
            say("charged"),
        )
        run = await h.start(agent)
        old = h.new_pool(capacity=1, owner="old-worker")
        new = h.new_pool(capacity=1, owner="new-worker")
        await old.claim()
        async with asyncio.timeout(SAFETY_S):
            await remote.first_arrived.wait()  # sent; the worker is lost before the answer
        async with h.sessionmaker() as session, session.begin():
            await session.execute(
                text("UPDATE runs SET lease_expires_at = now() - interval '1 s' WHERE id = :id"),
                {"id": run.id},
            )
        report = await Reconciler(h.sessionmaker, h.bus, h.runs).run_once()
        assert (report.timed_out, report.resumed) == (1, 1)

        async with asyncio.timeout(SAFETY_S):
            await new.run_until_idle()
        resumed = await h.run(run.id)
        async with h.sessionmaker() as session:
            (ledger,) = (await history.ledger(session, run.id)).values()
        key = idempotency_key(run.id, ledger.tool_call_id)

        remote.release.set()  # the first answer comes back to a worker that lost the run
        async with asyncio.timeout(SAFETY_S):
            await old.run_until_idle()
        assert await h.run(run.id) == resumed  # fenced off: it wrote nothing

        events = await h.event_types(run.id)
        if honoured:
            assert resumed.status is RunStatus.COMPLETED and resumed.result == "charged"
            assert remote.keys == [key, key]  # sent again, with the same key
            assert remote.charges == {key: 1}  # and charged once
            assert ledger.result is not None
            assert json.loads(json.loads(ledger.result)["body"]) == {"charge": 1}
            assert "agent_run.resume_unsafe" not in events
        else:
            assert resumed.status is RunStatus.WAITING_ON_HUMAN
            assert resumed.waiting_for is not None
            assert resumed.waiting_for.reason == "resume_unsafe"
            assert remote.keys == [key]  # never sent a second time
            assert "agent_run.resume_unsafe" in events
