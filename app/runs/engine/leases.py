"""How long a worker may count on its lease of a run, by its own clock.

The database grants a lease until `now() + ttl` at the claim or renewal, `now()` being
the start of that transaction; the worker's term ends `ttl` after it *sent* the statement,
which is no later. So while the term lasts, no other worker can have taken the run (the
reconciler only times out leases the database sees expired), and a worker that lost its
connection may keep waiting for the database to write its boundaries; once the term is
over it gives up, as if the lease were lost. The fence still decides every write: this
reckoning only bounds how long a worker keeps trying.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class LeaseTerm:
    def __init__(
        self, ttl_s: float, *, sent_at: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """`sent_at`: on `clock` (monotonic seconds), when the claim was sent."""
        self.ttl_s = ttl_s
        self.clock = clock
        self.held_until = sent_at + ttl_s

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at `sent_at` was granted."""
        self.held_until = max(self.held_until, sent_at + self.ttl_s)

    @property
    def remaining_s(self) -> float:
        return self.held_until - self.clock()

    def expired(self) -> bool:
        return self.remaining_s <= 0
