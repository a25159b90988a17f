"""How `loopwright` exits: what a followed run came to, or why the command failed."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    COMPLETED = 0
    FAILED = 1  # failed for good or dead-lettered
    USAGE = 2  # the command line was wrong (argparse's code)
    CANCELLED = 3
    TIMED_OUT = 4
    WAITING = 5  # the run waits on a person and the client could not ask (not a terminal)
    REQUEST_FAILED = 6  # the server refused a request
    UNREACHABLE = 7  # no server answered at the URL
    INTERRUPTED = 130  # Ctrl-C: the run goes on without the client


BY_STATUS = {
    "completed": Exit.COMPLETED,
    "failed": Exit.FAILED,
    "dead_letter": Exit.FAILED,
    "cancelled": Exit.CANCELLED,
    "timed_out": Exit.TIMED_OUT,
    "waiting_on_human": Exit.WAITING,
}
