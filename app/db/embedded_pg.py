"""The embedded PostgreSQL used when no DATABASE_URL is set: the `pgserver` wheel's server
binaries, running on a Unix socket inside a data directory this process owns."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class EmbeddedPostgres:
    url: str
    _server: Any

    def stop(self) -> None:
        """Release this process's handle; the server stops when no process holds one."""
        self._server.cleanup()


def start_embedded(data_dir: Path) -> EmbeddedPostgres:
    """Start (or join) the server in `data_dir`, initialising the directory if needed."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers): harmless here.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver  # imported lazily: only this path needs the server binaries

        server = pgserver.get_server(str(data_dir), cleanup_mode="stop")
    log.info("embedded PostgreSQL running in %s", data_dir)
    return EmbeddedPostgres(server.get_uri(), server)
