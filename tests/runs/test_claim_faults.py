"""A worker pool that cannot reach the database to claim logs
`agent_run.dispatch_next_failed` as a structured event and claims nothing, without raising:
the claim loop goes on, and the next wake-up or poll tries again."""

from __future__ import annotations

import logging
import socket

import pytest

from app.db.connection import make_engine, make_sessionmaker
from app.events.engine.bus import EventBus
from app.runs.engine.workers import WorkerPool


def _refused_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_claim_that_cannot_reach_the_database_is_logged_and_claims_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = make_engine(f"postgresql://postgres@127.0.0.1:{_refused_port()}/nowhere", pool_size=1)
    pool = WorkerPool(
        make_sessionmaker(engine), EventBus(), lambda run, owner, term: pytest.fail("claimed a run")
    )
    try:
        with caplog.at_level(logging.WARNING, logger="app.runs.engine.workers"):
            assert await pool.claim() == []
    finally:
        await engine.dispose()
    (record,) = [r for r in caplog.records if r.getMessage() == "agent_run.dispatch_next_failed"]
    fields = record.fields  # type: ignore[attr-defined]
    assert fields["event"] == "agent_run.dispatch_next_failed"
    assert fields["worker"] == pool.owner
    assert "refused" in fields["error"].lower() or "connect" in fields["error"].lower()
