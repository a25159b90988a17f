"""Fencing: a worker frozen (SIGSTOP) while it holds a run loses the run when its lease
expires; another worker takes the run over, and when the frozen one is let go (SIGCONT) its
late write is refused. Nothing it would have written is there: no boundary twice in the
transcript, no effect twice, one ending. The only trace of a refused write is the worker's
`lease lost` warning (there is no metric for it).

Frozen between boundaries (in a model call), the late write reaches the database and the
fence (lease owner and token) refuses it: the test fails without that check. Frozen during
a side-effecting call, the worker's heartbeat usually finds the lease gone before the result
is written, so that test holds even without the fence; it proves the outcome, not the
layer."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.connection import libpq_url
from tests.support.chaos_tools import CALLS_DDL, LEDGER_DDL
from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent
from tests.support.history import LEDGER_ROWS, RUN_EVENT_TYPES
from tests.support.processes import WorkerProcess

# Timing: a frozen worker and lease expiry measured in seconds.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

LEASE_TTL_S = 2
# Frozen between boundaries: the first model call is slow, so the holder is frozen inside
# it, before the call it asks for has started; the new owner's calls are as slow, so the
# run is still running, held under the new lease, when the frozen worker wakes and writes.
MODEL_CALL_SCRIPT: list[dict[str, Any]] = [
    {
        "tool_calls": [{"name": "charge_card", "input": {"amount": 5, "effect": "charge-0"}}],
        "latency_ms": 1500,
    },
    {"tool_calls": [{"name": "look_up", "input": {"q": "receipt"}}], "latency_ms": 1500},
    {"text": "paid", "latency_ms": 100},
]
# Frozen during a side-effecting call, just after its effect (the call holds for a while).
TOOL_CALL_SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "charge_card", "input": {"effect": "charge-0", "hold_s": 3}}]},
    {"text": "paid"},
]
LOST = "lease lost"  # what a worker logs when its write was refused (app/runs/loop/run_loop.py)


async def _sql(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


def _poll(what: str, check: Any, timeout_s: float = 30) -> Any:
    """`check()` once it is truthy; fails after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # watching other processes; nothing to inject


def _records(log_path: Path) -> list[dict[str, Any]]:
    lines = log_path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


@dataclass
class Takeover:
    """A run of an agent with `script`, on two workers: one will take it from the other."""

    dsn: str
    http: httpx.Client
    workers: list[WorkerProcess]
    run_id: str

    def lease(self, *, boundary: str | None = None) -> tuple[str, int] | None:
        """(owner, token) of the run while it is running (and has written a checkpoint of
        kind `boundary`, when given)."""
        rows = asyncio.run(
            _sql(
                self.dsn,
                "SELECT r.lease_owner, r.lease_token FROM runs AS r WHERE r.id = $1"
                " AND r.status = 'running' AND ($2::text IS NULL OR EXISTS ("
                " SELECT 1 FROM run_history AS c WHERE c.run_id = r.id AND c.kind = $2))",
                self.run_id,
                boundary,
            )
        )
        return (rows[0]["lease_owner"], rows[0]["lease_token"]) if rows else None

    def worker(self, pid: int) -> WorkerProcess:
        (worker,) = [w for w in self.workers if w.process is not None and w.process.pid == pid]
        return worker

    def taken_from(self, owner: str, token: int) -> None:
        """Waits for another worker to have claimed the run under a newer token: the frozen
        worker's lease expired and the reconciler requeued the run. (Only a claim bumps the
        token, and the frozen `owner` claims nothing; the new owner may already have let
        the run go again, as a run that halts for a person does at once.)"""
        query = "SELECT lease_token FROM runs WHERE id = $1"

        def claimed_again() -> bool:
            rows = asyncio.run(_sql(self.dsn, query, self.run_id))
            return bool(rows) and rows[0]["lease_token"] > token

        _poll(f"another worker than {owner} to take the run", claimed_again)

    def refused(self, pid: int) -> list[dict[str, Any]]:
        """Waits for the worker `pid` to log that it lost the run's lease."""
        log = self.worker(pid).log_path
        found: list[dict[str, Any]] = _poll(
            f"worker {pid} to find its lease lost",
            lambda: [
                r for r in _records(log) if LOST in r["message"] and self.run_id in r["message"]
            ],
        )
        return found

    def events(self) -> Counter[str]:
        rows = asyncio.run(_sql(self.dsn, RUN_EVENT_TYPES, self.run_id))
        return Counter(r["type"] for r in rows)

    def completed_by(self) -> list[int]:
        """The workers (pids) that logged the run's completion."""
        return [
            w.process.pid
            for w in self.workers
            for r in _records(w.log_path)
            if w.process is not None
            and r.get("event") == "agent_run.completed"
            and r.get("run_id") == self.run_id
        ]


@contextmanager
def _takeover(
    database_url: str, tmp_path: Path, script: list[dict[str, Any]]
) -> Iterator[Takeover]:
    dsn = libpq_url(database_url)
    for ddl in (LEDGER_DDL, CALLS_DDL):
        asyncio.run(_sql(dsn, ddl))
    env = {
        "CHAOS_LEDGER_DSN": dsn,
        "LOOPWRIGHT_TOOLS__PLUGINS": '["tests.support.chaos_tools:tools"]',
        "LOOPWRIGHT_WORKERS__LEASE_TTL_S": str(LEASE_TTL_S),
        "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
        "LOOPWRIGHT_RECONCILER__INTERVAL_S": "0.5",
    }
    # Leaving it lets a frozen worker go (SIGCONT) before stopping it.
    with Cluster(database_url, tmp_path, env) as cluster:
        api = cluster.server()
        workers = [cluster.worker(f"worker{i}") for i in range(2)]
        with httpx.Client(base_url=api.url, timeout=30) as http:
            agent = scripted_agent(
                http,
                "payer",
                script,
                tools=["charge_card", "look_up"],
                auto_approve=["charge_card"],  # this test is about leases
            )
            run = http.post("/v1/runs", json={"agent_id": agent["id"], "input": "pay"}).json()
            yield Takeover(dsn, http, workers, run["id"])


@pytest.mark.timeout(180)
def test_a_worker_frozen_between_boundaries_loses_its_run_and_its_late_write_is_refused(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    with _takeover(database_url, tmp_path, MODEL_CALL_SCRIPT) as c:
        run_id = c.run_id
        owner, token = _poll("the run's first boundary", lambda: c.lease(boundary="input"))
        pid = int(owner.split(":")[1])  # host:pid:id
        os.kill(pid, signal.SIGSTOP)
        # Frozen inside its first model call: the call it will ask for has not started.
        started = asyncio.run(
            _sql(c.dsn, f"SELECT 1 FROM {LEDGER_ROWS} AS c WHERE run_id = $1", run_id)
        )
        assert started == [], "the worker was frozen too late"
        c.taken_from(owner, token)
        (other,) = [w.process.pid for w in c.workers if w.process and w.process.pid != pid]
        # Let go while the new owner is in its first model call: the frozen worker's model
        # call is over, and it writes its response (and would then start its call).
        os.kill(pid, signal.SIGCONT)
        refused = c.refused(pid)
        final = c.http.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 60}).json()
        messages = c.http.get(f"/v1/conversations/{final['conversation_id']}/messages").json()
        events = c.events()
        completed_by = c.completed_by()

    assert refused[0]["level"] == "warning"
    assert final["status"] == "completed" and final["result"] == "paid", final
    assert final["lease_token"] == token + 1  # one takeover, by the other worker

    # The transcript: each boundary once, in order (the frozen worker's response is not
    # there a second time).
    kinds = [
        (m["role"], [b["type"] for b in m["content"]]) for m in messages if m["run_id"] == run_id
    ]
    assert kinds == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ], kinds
    # The effect once, run by the new owner; the ledger knows one call of each tool.
    ledger = asyncio.run(
        _sql(c.dsn, "SELECT effect, pid FROM chaos_ledger WHERE run_id = $1", run_id)
    )
    assert [(r["effect"], r["pid"]) for r in ledger] == [("charge-0", other)]
    calls = asyncio.run(
        _sql(c.dsn, f"SELECT tool, completed_at FROM {LEDGER_ROWS} AS c WHERE run_id = $1", run_id)
    )
    assert Counter(call["tool"] for call in calls) == {"charge_card": 1, "look_up": 1}
    assert all(call["completed_at"] is not None for call in calls)
    # One ending, and events that tell one takeover.
    assert events["agent_run.completed"] == 1
    assert events["agent_run.timed_out"] == events["agent_run.resume"] == 1
    assert events["agent_run.started"] == 2
    assert events["tool_call.started"] == events["tool_call.completed"] == 2
    assert completed_by == [other]  # not the frozen worker, after it was let go


@pytest.mark.timeout(180)
def test_a_worker_frozen_during_a_side_effecting_call_cannot_record_its_result(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    with _takeover(database_url, tmp_path, TOOL_CALL_SCRIPT) as c:
        run_id = c.run_id
        query = "SELECT pid FROM chaos_ledger WHERE run_id = $1"
        ((pid,),) = _poll("the effect", lambda: asyncio.run(_sql(c.dsn, query, run_id)))
        owner, token = _poll("the run's lease", c.lease)
        assert owner.split(":")[1] == str(pid)
        # Frozen holding the call's result (the call holds 3 s after its effect).
        os.kill(pid, signal.SIGSTOP)
        # The new owner finds a side-effecting call begun and unanswered: it may have taken
        # effect (it did), so it is not run again; the run waits for a person.
        c.taken_from(owner, token)
        halted = _poll(
            "the run to halt",
            lambda: (
                (r := c.http.get(f"/v1/runs/{run_id}").json())["status"] == "waiting_on_human" and r
            ),
        )
        os.kill(pid, signal.SIGCONT)  # its call ends, and it tries to record the result
        refused = c.refused(pid)
        final = c.http.get(f"/v1/runs/{run_id}").json()
        messages = c.http.get(f"/v1/conversations/{final['conversation_id']}/messages").json()
        events = c.events()

    assert refused[0]["level"] == "warning"
    assert halted["waiting_for"]["reason"] == "resume_unsafe"
    # Nothing of the late result: the run still waits, its call unanswered in the ledger
    # and in the transcript, the effect made once.
    assert final["status"] == "waiting_on_human" and final["version"] == halted["version"]
    assert final["lease_token"] == token + 1
    kinds = [(m["role"], [b["type"] for b in m["content"]]) for m in messages]
    assert kinds == [("user", ["text"]), ("assistant", ["tool_use"])], kinds
    calls = asyncio.run(
        _sql(
            c.dsn, f"SELECT completed_at, result FROM {LEDGER_ROWS} AS c WHERE run_id = $1", run_id
        )
    )
    assert [(r["completed_at"], r["result"]) for r in calls] == [(None, None)]
    effects = asyncio.run(_sql(c.dsn, "SELECT effect FROM chaos_ledger WHERE run_id = $1", run_id))
    assert [r["effect"] for r in effects] == ["charge-0"]
    assert events["tool_call.completed"] == 0 and events["agent_run.resume_unsafe"] == 1
