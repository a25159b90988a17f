"""`loopwright schedules`' formatting: an interval in short, and a fire time in the
schedule's zone (or as the server sent it, if this machine does not know the zone)."""

from __future__ import annotations

import pytest

from app.triggers.cli import every, local


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (60, "1m"),
        (90, "1m30s"),
        (3600, "1h"),
        (5400, "1h30m"),
        (86_400, "1d"),
        (90_061, "1d1h1m1s"),
    ],
)
def test_an_interval_in_short(seconds: int, shown: str) -> None:
    assert every(seconds) == shown


def test_a_fire_time_in_its_zone() -> None:
    assert local("2026-03-29T01:00:00+00:00", "Europe/Berlin") == "2026-03-29 03:00 CEST"
    assert local("2026-11-01T06:00:00+00:00", "America/New_York") == "2026-11-01 01:00 EST"
    assert local("2026-11-01T05:00:00+00:00", "America/New_York") == "2026-11-01 01:00 EDT"
    assert local("2026-03-29T01:00:00+00:00", "Nowhere/Else") == "2026-03-29T01:00:00+00:00"
