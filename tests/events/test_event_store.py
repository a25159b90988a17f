"""The event outbox and idempotency keys on real Postgres: per-stream sequence numbers,
replay reads after a sequence number, and the keys a create is answered from (live ones
only: an expired key is not found, and inserting it again replaces it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import idempotency
from app.events import store as events
from app.events.store import NewEvent

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def batch(*types: str) -> list[NewEvent]:
    return [NewEvent(t, {"n": i, "type": t}) for i, t in enumerate(types)]


async def test_appends_get_consecutive_sequence_numbers(session: AsyncSession, token: str) -> None:
    stream = f"s-{token}"

    first = await events.append_events(session, stream, batch("a", "b", "c"), NOW)
    second = await events.append_events(session, stream, batch("d", "e"), NOW)

    assert first == [1, 2, 3]
    assert second == [4, 5]
    assert await events.last_seq(session, stream) == 5


async def test_each_stream_counts_on_its_own(session: AsyncSession, token: str) -> None:
    one, two = f"one-{token}", f"two-{token}"

    await events.append_events(session, one, batch("a", "b"), NOW)
    assert await events.append_events(session, two, batch("x"), NOW) == [1]
    assert await events.append_events(session, one, batch("c"), NOW) == [3]

    assert await events.last_seq(session, one) == 3
    assert await events.last_seq(session, two) == 1


async def test_appending_nothing_claims_no_sequence_numbers(
    session: AsyncSession, token: str
) -> None:
    stream = f"s-{token}"

    assert await events.append_events(session, stream, [], NOW) == []
    assert await events.last_seq(session, stream) == 0
    assert await events.append_events(session, stream, batch("a"), NOW) == [1]


async def test_read_after_returns_exactly_the_later_events_in_order(
    session: AsyncSession, token: str
) -> None:
    stream = f"s-{token}"
    await events.append_events(session, stream, batch("a", "b", "c"), NOW)
    await events.append_events(session, stream, batch("d", "e"), NOW)
    await events.append_events(session, f"other-{token}", batch("x", "y", "z"), NOW)

    later = await events.read_events(session, stream, after=2, limit=100)

    assert [(e.seq, e.type) for e in later] == [(3, "c"), (4, "d"), (5, "e")]
    assert {e.stream for e in later} == {stream}
    assert later[0].data == {"n": 2, "type": "c"}
    assert later[0].created_at == NOW


async def test_read_respects_limit_and_the_end_of_the_stream(
    session: AsyncSession, token: str
) -> None:
    stream = f"s-{token}"
    await events.append_events(session, stream, batch("a", "b", "c", "d"), NOW)

    assert [e.seq for e in await events.read_events(session, stream, after=0, limit=2)] == [1, 2]
    assert await events.read_events(session, stream, after=4, limit=10) == []
    assert await events.read_events(session, f"none-{token}", after=0, limit=10) == []


async def test_last_seq_of_an_unknown_stream_is_zero(session: AsyncSession, token: str) -> None:
    assert await events.last_seq(session, f"never-{token}") == 0


def record(scope: str, key: str, digest: str = "h1") -> idempotency.KeyRecord:
    return idempotency.KeyRecord(scope, key, digest, f"task-{key}", {"id": f"task-{key}"})


async def test_find_keys_returns_the_stored_records_of_the_scope(
    session: AsyncSession, token: str
) -> None:
    scope = f"scope-{token}"
    k1, k2 = record(scope, "k1"), record(scope, "k2", "h2")
    await idempotency.insert_keys(session, [k1, k2, record(f"elsewhere-{token}", "k3")], NOW)

    found = await idempotency.find_keys(session, scope, ["k1", "k2", "k3", "missing", "k1"])

    assert found == {"k1": k1, "k2": k2}
    assert await idempotency.find_keys(session, scope, []) == {}


async def test_insert_keys_of_nothing_writes_nothing(session: AsyncSession, token: str) -> None:
    await idempotency.insert_keys(session, [], NOW)

    assert await idempotency.find_keys(session, f"scope-{token}", ["k1"]) == {}


async def test_find_keys_ignores_keys_older_than_live_since(
    session: AsyncSession, token: str
) -> None:
    scope = f"scope-{token}"
    await idempotency.insert_keys(session, [record(scope, "old")], NOW - timedelta(hours=25))
    await idempotency.insert_keys(session, [record(scope, "edge")], NOW - timedelta(hours=24))
    await idempotency.insert_keys(session, [record(scope, "new")], NOW)
    live_since = NOW - timedelta(hours=24)

    found = await idempotency.find_keys(
        session, scope, ["old", "edge", "new"], live_since=live_since
    )

    assert set(found) == {"edge", "new"}  # a key is live through the window's last instant
    assert set(await idempotency.find_keys(session, scope, ["old", "new"])) == {"old", "new"}


async def test_inserting_an_expired_key_replaces_it_and_a_live_one_is_refused(
    session: AsyncSession, token: str
) -> None:
    scope = f"scope-{token}"
    await idempotency.insert_keys(session, [record(scope, "k1", "first")], NOW)
    later = NOW + timedelta(hours=25)
    live_since = later - timedelta(hours=24)

    await idempotency.insert_keys(
        session, [record(scope, "k1", "second")], later, live_since=live_since
    )

    found = await idempotency.find_keys(session, scope, ["k1"], live_since=live_since)
    assert found["k1"].request_hash == "second"
    with pytest.raises(IntegrityError):  # as when another transaction committed it first
        async with session.begin_nested():
            await idempotency.insert_keys(
                session, [record(scope, "k1", "third")], later, live_since=live_since
            )
    assert (await idempotency.find_keys(session, scope, ["k1"]))["k1"].request_hash == "second"


async def test_a_key_made_by_a_runs_tool_call_never_expires_by_age(
    session: AsyncSession, token: str
) -> None:
    """Found however old, and an insert of the same key does not replace it (the sweep
    decides when it goes, by its run)."""
    scope = f"scope-{token}"
    made = replace(record(scope, "k1", "first"), run_id=f"run-{token}")
    await idempotency.insert_keys(session, [made], NOW - timedelta(days=30))
    live_since = NOW - timedelta(hours=24)

    assert await idempotency.find_keys(session, scope, ["k1"], live_since=live_since) == {
        "k1": made
    }
    with pytest.raises(IntegrityError):
        async with session.begin_nested():
            await idempotency.insert_keys(
                session, [record(scope, "k1", "second")], NOW, live_since=live_since
            )


async def test_find_scoped_keys_reads_keys_of_several_scopes(
    session: AsyncSession, token: str
) -> None:
    a, b = f"a-{token}", f"b-{token}"
    ka, kb = record(a, "k"), replace(record(b, "k", "h2"), run_id="run-1")
    await idempotency.insert_keys(session, [ka, kb, record(f"c-{token}", "k")], NOW)

    found = await idempotency.find_scoped_keys(session, [(a, "k"), (b, "k"), (a, "missing")])

    assert found == {(a, "k"): ka, (b, "k"): kb}


def test_request_hash_ignores_key_order_but_not_values() -> None:
    body = {"title": "t", "tags": ["a", "b"], "nested": {"x": 1, "y": None}}
    reordered = {"nested": {"y": None, "x": 1}, "tags": ["a", "b"], "title": "t"}

    digest = idempotency.request_hash(body)

    assert digest == idempotency.request_hash(reordered)
    assert len(digest) == 64
    assert digest != idempotency.request_hash(body | {"title": "u"})
    assert digest != idempotency.request_hash(body | {"tags": ["b", "a"]})
