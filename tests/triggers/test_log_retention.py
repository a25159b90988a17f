"""The delivery and fire logs are kept for their windows: past it, settled deliveries (with
their attempts) and fires go, oldest first, in chunks; pending deliveries and anything
younger stay; a window of None keeps everything."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.ids import id_floor, new_id
from app.db.connection import make_sessionmaker
from app.triggers.engine.log_retention import LogRetention

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
WINDOW = timedelta(days=30)


def made_at(prefix: str, at: datetime, n: int) -> str:
    """An id as `new_id` would have made it at `at` (its random part: n)."""
    floor = id_floor(prefix, at)
    return floor[:-4] + f"{n:04d}"


async def fill(db: AsyncEngine) -> None:
    async with db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO webhooks (id, url, description, event_types, secret, enabled, "
                "version) VALUES ('wh_1', 'https://example.com/h', '', "
                "ARRAY['agent_run.completed'], 's', true, 1)"
            )
        )
        await conn.execute(
            text(
                "INSERT INTO triggers (id, name, description, kind, enabled, target, config, "
                "version) VALUES ('trg_1', 't', '', 'chain', false, '{}', '{}', 1)"
            )
        )
        for age_days, status, n in [
            (40, "succeeded", 1),
            (40, "dead_letter", 2),
            (40, "pending", 3),  # still to send, however old
            (31, "succeeded", 4),
            (29, "succeeded", 5),  # inside the window
        ]:
            delivery = made_at("whd", NOW - timedelta(days=age_days), n)
            await conn.execute(
                text(
                    "INSERT INTO webhook_deliveries (id, webhook_id, event_type, stream, seq, "
                    "payload, status, attempts, attempts_before_redeliver, next_attempt_at) "
                    "VALUES (:id, 'wh_1', 'agent_run.completed', 'runs', :n, '{}', :status, "
                    "1, 0, now())"
                ),
                {"id": delivery, "n": n, "status": status},
            )
            await conn.execute(
                text(
                    "INSERT INTO webhook_delivery_attempts (delivery_id, attempt, started_at, "
                    "succeeded, latency_ms) VALUES (:id, 1, now(), true, 5)"
                ),
                {"id": delivery},
            )
        for age_days, n in [(45, 1), (35, 2), (31, 3), (1, 4)]:
            at = NOW - timedelta(days=age_days)
            await conn.execute(
                text(
                    "INSERT INTO trigger_fires (id, trigger_id, fire_key, status, fired_at) "
                    "VALUES (:id, 'trg_1', :key, 'started', :at)"
                ),
                {"id": made_at("fire", at, n), "key": f"k{n}", "at": at},
            )


async def left(db: AsyncEngine) -> tuple[list[int], int, list[str]]:
    async with db.connect() as conn:
        deliveries = await conn.execute(text("SELECT seq FROM webhook_deliveries ORDER BY seq"))
        attempts = await conn.execute(text("SELECT count(*) FROM webhook_delivery_attempts"))
        fires = await conn.execute(text("SELECT fire_key FROM trigger_fires ORDER BY fire_key"))
        return list(deliveries.scalars()), attempts.scalar_one(), list(fires.scalars())


async def test_settled_deliveries_and_fires_past_their_windows_go(clean_db: AsyncEngine) -> None:
    await fill(clean_db)
    retention = LogRetention(
        make_sessionmaker(clean_db), deliveries=WINDOW, fires=WINDOW, chunk=1, clock=lambda: NOW
    )

    assert await retention.run_once() == {"whd": 3, "fire": 3}  # one row per transaction

    assert await left(clean_db) == ([3, 5], 2, ["k4"])
    assert await retention.run_once() == {"whd": 0, "fire": 0}


async def test_a_window_of_none_keeps_that_log(clean_db: AsyncEngine) -> None:
    await fill(clean_db)
    keep_fires = LogRetention(
        make_sessionmaker(clean_db), deliveries=WINDOW, fires=None, clock=lambda: NOW
    )
    assert await keep_fires.run_once() == {"whd": 3}
    assert (await left(clean_db))[2] == ["k1", "k2", "k3", "k4"]
    nothing = LogRetention(make_sessionmaker(clean_db), deliveries=None, fires=None)
    assert nothing.keeps_everything


def test_an_id_floor_sorts_below_every_id_made_from_then_on() -> None:
    before = new_id("whd")
    floor = id_floor("whd", datetime.now(UTC) + timedelta(milliseconds=5))
    assert before < floor
    assert floor < id_floor("whd", datetime.now(UTC) + timedelta(seconds=1))
