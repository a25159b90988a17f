"""Real `loopwright serve` and `loopwright worker` processes on one database, for
end-to-end tests that kill them."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from tests.support.processes import ServerProcess, WorkerProcess

ROOT = Path(__file__).resolve().parents[2]


class Cluster:
    """Processes sharing one environment, each named, logging to `<log_dir>/<name>.log`.
    Leaving the `with` block stops every one still running, whatever the test did to it."""

    def __init__(
        self, database_url: str, log_dir: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self._env = {
            "DATABASE_URL": database_url,
            # This checkout's code (the editable install may point at another checkout),
            # and the tests' tool plugins, importable by the children.
            "PYTHONPATH": str(ROOT),
            # Few connections each: the workers' tests and these processes share one
            # Postgres (100 connections by default).
            "LOOPWRIGHT_DATABASE__POOL_SIZE": "3",
            **(env or {}),
        }
        self._log_dir = log_dir
        self._processes: dict[str, ServerProcess] = {}

    def server(
        self, name: str = "api", env: Mapping[str, str] | None = None, *, workers: bool = False
    ) -> ServerProcess:
        """A `serve`, started (ready); API only unless `workers`."""
        api_only = {} if workers else {"LOOPWRIGHT_WORKERS__ENABLED": "false"}
        server = ServerProcess({**self._env, **api_only, **(env or {})}, self._log(name))
        self._add(name, server)
        server.start()
        return server

    def worker(
        self,
        name: str = "worker",
        env: Mapping[str, str] | None = None,
        *,
        await_ready: bool = True,
    ) -> WorkerProcess:
        """A `worker`, started; with `await_ready` False only spawned."""
        worker = WorkerProcess({**self._env, **(env or {})}, self._log(name))
        self._add(name, worker)
        if await_ready:
            worker.start()
        else:
            worker.spawn()
        return worker

    def _log(self, name: str) -> Path:
        return self._log_dir / f"{name}.log"

    def _add(self, name: str, process: ServerProcess) -> None:
        assert name not in self._processes, f"a second process named {name}"
        self._processes[name] = process  # before it starts: stopped even if it fails to

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        stuck = []
        for name, process in reversed(self._processes.items()):
            try:
                process.terminate_and_wait()
            except subprocess.TimeoutExpired:
                process.kill()  # left behind, it would hold the database and its port
                stuck.append(name)
        if stuck and exc is None:  # a test that failed already fails for its own reason
            raise AssertionError(f"did not stop on SIGTERM: {stuck}")
