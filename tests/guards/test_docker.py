"""The container set-up keeps what `docker compose up` relies on: the service reaches the
compose file's own Postgres, starts only once it is healthy, keeps its data in a named
volume, and the image probes a real route; the Dockerfile installs the dependencies before
it copies the code, so that a change to the code does not reinstall them.

Read as files (no Docker daemon is needed, nor reachable here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from fastapi.routing import APIRoute

from app.http import health

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return document


def _with_defaults(value: str) -> str:
    """Compose's `${VAR:-default}` as it reads with VAR unset."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    pairs = [line.split(maxsplit=1) for line in lines if line and not line.startswith("#")]
    return [(pair[0].upper(), pair[1] if len(pair) > 1 else "") for pair in pairs]


def _service_env(service: dict[str, Any]) -> dict[str, Any]:
    environment = service["environment"]
    assert isinstance(environment, dict), "environment as a mapping"
    return environment


def test_the_service_points_at_the_compose_postgres() -> None:
    services = _compose()["services"]
    db_env = _service_env(services["db"])
    url = urlsplit(_with_defaults(_service_env(services["loopwright"])["DATABASE_URL"]))
    assert url.scheme in {"postgresql", "postgres"}
    assert url.hostname == "db"
    assert url.port in {None, 5432}
    assert url.username == db_env["POSTGRES_USER"]
    assert url.password == _with_defaults(db_env["POSTGRES_PASSWORD"])
    assert url.path == f"/{db_env['POSTGRES_DB']}"


def test_postgres_keeps_its_data_in_a_named_volume() -> None:
    compose = _compose()
    mounts = [mount.split(":") for mount in compose["services"]["db"]["volumes"]]
    assert ["pgdata", "/var/lib/postgresql/data"] in mounts
    assert "pgdata" in compose["volumes"]


def test_the_service_starts_once_postgres_is_healthy() -> None:
    services = _compose()["services"]
    probe = services["db"]["healthcheck"]["test"]
    assert probe[0] == "CMD" and probe[1] == "pg_isready"
    # Over TCP: the image's first-boot server listens on the socket only.
    assert probe[probe.index("-h") + 1] == "127.0.0.1"
    assert services["loopwright"]["depends_on"]["db"]["condition"] == "service_healthy"


def test_the_service_binds_beyond_loopback_only_with_an_api_key() -> None:
    keys = _service_env(_compose()["services"]["loopwright"])["LOOPWRIGHT_AUTH__API_KEYS"]
    # `:?`: compose refuses to start without a key rather than start an open server.
    assert re.fullmatch(r'\["\$\{LOOPWRIGHT_API_KEY:\?[^}]+\}"\]', keys)


def test_the_published_port_is_the_one_the_image_serves() -> None:
    instructions = _instructions()
    exposed = {value for kind, value in instructions if kind == "EXPOSE"}
    env = " ".join(value for kind, value in instructions if kind == "ENV")
    port = re.search(r"LOOPWRIGHT_SERVER__PORT=(\d+)", env)
    assert port is not None and exposed == {port[1]}
    published = _compose()["services"]["loopwright"]["ports"]
    assert [entry.rsplit(":", 1)[1] for entry in published] == [port[1]]


def test_the_image_probes_a_route_the_service_has() -> None:
    (probe,) = [value for kind, value in _instructions() if kind == "HEALTHCHECK"]
    path = re.search(r"http://127\.0\.0\.1:\d+(/\w+)", probe)
    assert path is not None
    assert path[1] in {route.path for route in health.router.routes if isinstance(route, APIRoute)}


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    instructions = _instructions()
    copies = [(index, value) for index, (kind, value) in enumerate(instructions) if kind == "COPY"]
    metadata = next(index for index, value in copies if value.startswith("pyproject.toml"))
    code = next(index for index, value in copies if value.split()[0] == "app")
    installs = [
        index
        for index, (kind, value) in enumerate(instructions)
        if kind == "RUN" and "pip install" in value
    ]
    assert metadata < installs[0] < code, "dependencies installed between metadata and code"
    # Nothing but metadata reaches the image before the dependency layer.
    assert all(value.split()[0] == "pyproject.toml" for i, value in copies if i < installs[0])


@pytest.mark.parametrize("kept_out", [".git", ".venv", "tests", "**/__pycache__"])
def test_the_build_context_leaves_out_what_the_image_does_not_need(kept_out: str) -> None:
    assert kept_out in (ROOT / ".dockerignore").read_text().splitlines()


def test_the_image_runs_as_a_user_that_is_not_root() -> None:
    users = [value for kind, value in _instructions() if kind == "USER"]
    assert users and users[-1] not in {"root", "0"}
