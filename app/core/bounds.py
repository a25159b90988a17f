"""Upper bounds of the integers clients send, taken from the columns they meet.

A value past its column's range can never match a row, and Postgres refuses it as a query
parameter (a 500, or an SSE stream whose every read fails); bounding it in the request
schema turns it into a 422 `validation_error` naming the field instead.

Datetimes the same way: `StorableDatetime` for every datetime a client sends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

PG_INTEGER_MAX = 2**31 - 1
PG_BIGINT_MAX = 2**63 - 1

# Versions of tasks, runs, agents, workflows, executions and approvals are INTEGER columns.
VERSION_MAX = PG_INTEGER_MAX
# Event sequence numbers (`events.seq`, the SSE `id`) are BIGINT.
EVENT_ID_MAX = PG_BIGINT_MAX
# Completed sprints a velocity average may span.
MAX_VELOCITY_WINDOW = 50
# A message's position in its conversation (`messages.position`) is INTEGER.
POSITION_MAX = PG_INTEGER_MAX


def decimal_pattern(minimum: int, maximum: int) -> str:
    """A regular expression (unanchored) matching exactly the decimal integers from
    `minimum` (0 or 1) to `maximum`, without leading zeros: for headers, where a number is
    text and JSON Schema's `minimum`/`maximum` do not apply. `decimal_pattern(1, 2**31 - 1)`
    says "1 to 2147483647" in a form schema tools can check and generate from."""
    if minimum not in (0, 1) or maximum < 10:
        raise ValueError("minimum must be 0 or 1, maximum at least 10")
    top = str(maximum)
    shorter = f"[1-9][0-9]{{0,{len(top) - 2}}}"  # 1 to len(top) - 1 digits
    alternatives = ["0", shorter] if minimum == 0 else [shorter]
    for i, digit in enumerate(top):
        low = 1 if i == 0 else 0
        if int(digit) > low:
            rest = len(top) - i - 1
            below = f"[{low}-{int(digit) - 1}]" if int(digit) - 1 > low else str(low)
            alternatives.append(top[:i] + below + (f"[0-9]{{{rest}}}" if rest else ""))
    alternatives.append(top)
    return "(?:" + "|".join(alternatives) + ")"


# Postgres reads a UTC offset of at most 15:59:59 either way; Python reads up to 23:59.
PG_MAX_UTC_OFFSET = timedelta(hours=16)


def _storable(value: datetime) -> datetime:
    """What Postgres can store as `timestamptz`, as Python writes it: an offset from UTC
    under 16 hours (`-19:37` parses in Python, and Postgres refuses it), and an instant that
    stays in years 1 to 9999 once moved to UTC (`0001-01-01T00:00:00+01:00` falls in year 0,
    `9999-12-31T23:00:00-05:00` in year 10000). A datetime without an offset is read as
    UTC already."""
    offset = value.utcoffset()
    if offset is None:
        return value
    if abs(offset) >= PG_MAX_UTC_OFFSET:
        raise PydanticCustomError(
            "datetime_offset_unstorable", "must have a UTC offset between -15:59 and +15:59"
        )
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError(
            "datetime_unstorable",
            "must fall between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once moved to UTC",
        ) from None
    return value


StorableDatetime = Annotated[datetime, AfterValidator(_storable)]
