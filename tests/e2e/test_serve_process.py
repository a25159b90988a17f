"""The real `loopwright serve` process: killed with SIGKILL, restarted, stopped with SIGTERM;
and started with no DATABASE_URL, on the embedded PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.e2e


def _acknowledged_writes(url: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    with httpx.Client(base_url=url, timeout=10) as http:
        task = http.post("/v1/tasks", json={"title": "survive", "assigned_to": "ann"}).json()
        moved = http.post(f"/v1/tasks/{task['id']}/transitions", json={"to": "in_progress"})
        assert moved.status_code == 200
        trail = http.get(f"/v1/tasks/{task['id']}/transitions").json()
    return moved.json(), trail


def test_acknowledged_writes_survive_sigkill_and_sigterm_exits_cleanly(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    with Cluster(database_url, tmp_path) as cluster:
        server = cluster.server("serve", workers=True)
        task, trail = _acknowledged_writes(server.url)
        server.kill()

        server.start()
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get(f"/v1/tasks/{task['id']}").json() == task
            assert http.get(f"/v1/tasks/{task['id']}/transitions").json() == trail
            again = http.patch(
                f"/v1/tasks/{task['id']}", json={"title": "still here"}, headers={"If-Match": '"2"'}
            )
            assert again.status_code == 200 and again.json()["version"] == 3
        assert server.terminate(), server.log()


def test_without_database_url_it_runs_on_the_embedded_postgres(tmp_path: Path) -> None:
    env = {"LOOPWRIGHT_DATABASE__EMBEDDED_DATA_DIR": str(tmp_path / "pgdata")}
    server = ServerProcess(env, tmp_path / "serve.log")
    server.start(ready_timeout_s=120)
    task, _ = _acknowledged_writes(server.url)
    assert server.terminate(), server.log()

    server.start(ready_timeout_s=120)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get(f"/v1/tasks/{task['id']}").json() == task
    assert server.terminate(), server.log()
    assert (tmp_path / "pgdata" / "PG_VERSION").exists()
