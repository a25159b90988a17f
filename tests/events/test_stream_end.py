"""When a run's own stream ends: after the event that settled the run, unless a later
event of the same commit (an automatic resume) or a retry put it back in the queue."""

from __future__ import annotations

from app.events.api.streams import ends_at
from app.events.engine.stream_tails import Encoded


def test_a_runs_stream_ends_by_the_runs_latest_status_in_a_batch() -> None:
    def event(seq: int, settles: bool | None) -> Encoded:
        return Encoded(seq, b"", settles)

    message, timed_out, resumed = event(1, None), event(2, True), event(3, False)
    assert ends_at([message], None, 10.0) is None  # no lifecycle event: unchanged
    assert ends_at([message, timed_out], None, 10.0) == 10.0  # settled: ends then
    assert ends_at([timed_out, resumed], None, 10.0) is None  # requeued in the same commit
    assert ends_at([resumed], 10.0, 20.0) is None  # a retry after the settle: stays open
    assert ends_at([message], 10.0, 20.0) == 10.0  # the linger is not pushed back
    assert ends_at([event(4, True)], 10.0, 20.0) == 10.0
