"""The embedded PostgreSQL used when no DATABASE_URL is set: the `pgserver` wheel's server
binaries, running on a Unix socket inside a data directory this process owns."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the server in `data_dir` and return its URL. The server stops when
    the last process using it exits."""
    import pgserver  # imported lazily: only this path needs the server binaries

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(data_dir), cleanup_mode="stop")
    url: str = server.get_uri()
    log.info("embedded PostgreSQL running in %s", data_dir)
    return url
