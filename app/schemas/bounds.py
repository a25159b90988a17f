"""Upper bounds of the integers clients send, taken from the columns they meet.

A value past its column's range can never match a row, and Postgres refuses it as a query
parameter (a 500, or an SSE stream whose every read fails); bounding it in the request
schema turns it into a 422 `validation_error` naming the field instead.
"""

from __future__ import annotations

PG_INTEGER_MAX = 2**31 - 1
PG_BIGINT_MAX = 2**63 - 1

# Versions of tasks, runs, agents, workflows, executions and approvals are INTEGER columns.
VERSION_MAX = PG_INTEGER_MAX
# Event sequence numbers (`events.seq`, the SSE `id`) are BIGINT.
EVENT_ID_MAX = PG_BIGINT_MAX
# A message's position in its conversation (`messages.position`) is INTEGER.
POSITION_MAX = PG_INTEGER_MAX
