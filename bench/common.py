"""What the benchmarks share: progress output, percentiles, peak RSS, scratch databases."""

from __future__ import annotations

import resource
import sys
from collections.abc import Sequence

import asyncpg
from sqlalchemy.engine import make_url

from app.db import libpq_url


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[rank]


def with_database(server_url: str, name: str) -> str:
    return make_url(libpq_url(server_url)).set(database=name).render_as_string(hide_password=False)


async def admin(server_url: str, sql: str) -> None:
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
