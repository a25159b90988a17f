"""API keys, the loopback rule, and the probes (including a database that is down)."""

from __future__ import annotations

import re

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.support.api import assert_problem
from tests.support.server import make_settings, running_server


async def test_api_keys_are_required_when_configured(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["k-one", "k-two"]})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        missing = await http.get("/v1/tasks")
        assert_problem(missing, 401, "unauthorized")
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = await http.get("/v1/tasks", headers={"Authorization": "Bearer nope"})
        assert_problem(wrong, 401, "unauthorized")
        created = await http.post(
            "/v1/tasks", json={"title": "t"}, headers={"Authorization": "Bearer k-two"}
        )
        assert created.status_code == 201 and created.json()["created_by"] == "key-1"
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200


DOCS = ["/openapi.json", "/docs", "/redoc"]


async def test_the_api_description_needs_a_key_when_keys_are_configured(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["k-one"]})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        for path in DOCS:
            assert_problem(await http.get(path), 401, "unauthorized")
            keyed = await http.get(path, headers={"Authorization": "Bearer k-one"})
            assert keyed.status_code == 200, path
        document = (await http.get(DOCS[0], headers={"Authorization": "Bearer k-one"})).json()
        assert "/v1/runs" in document["paths"]
        assert "/openapi.json" not in document["paths"]  # the description describes the API
        assert document["paths"]["/v1/runs"]["post"]["security"] == [{"HTTPBearer": []}]


async def test_a_setting_makes_the_api_description_public(
    database_url: str, clean_db: AsyncEngine
) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["k-one"], "public_docs": True})
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        for path in DOCS:
            assert (await http.get(path)).status_code == 200, path
        assert_problem(await http.get("/v1/tasks"), 401, "unauthorized")  # only the docs


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_refuses_to_listen_beyond_loopback_without_keys(host: str) -> None:
    with pytest.raises(ValidationError, match="without API keys"):
        Settings.model_validate({"server": {"host": host}})
    with_keys = Settings.model_validate({"server": {"host": host}, "auth": {"api_keys": ["k"]}})
    assert with_keys.server.host == host


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_keys(host: str) -> None:
    assert Settings.model_validate({"server": {"host": host}}).server.host == host


async def test_probes(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = (await client.get("/readyz")).json()
    assert ready["status"] == "ready"
    components = {c["name"]: c for c in ready["components"]}
    assert {"coordinator", "merge queue", "reconciler", "scheduler"} <= set(components)
    assert components["reconciler"]["state"] == "running"
    assert components["reconciler"]["restarts"] == 0


async def test_a_database_that_is_down_gives_503_unavailable_not_500() -> None:
    # Port 1 on loopback: nothing listens, every connection is refused.
    settings = make_settings(
        "postgresql://postgres@127.0.0.1:1/none", database={"pool_timeout_s": 2.0}
    )
    async with running_server(settings) as url, httpx.AsyncClient(base_url=url) as http:
        assert (await http.get("/healthz")).status_code == 200
        assert_problem(await http.get("/readyz"), 503, "unavailable")
        assert_problem(await http.get("/v1/tasks"), 503, "unavailable")
        created = await http.post("/v1/tasks", json={"title": "t"})
        problem = assert_problem(created, 503, "unavailable")
        assert "Retry-After" in created.headers or "retry-after" in created.headers
        assert "127.0.0.1" not in problem["detail"]


async def test_the_docs_pages_load_everything_from_the_service_itself(
    client: httpx.AsyncClient,
) -> None:
    """Offline, a page that pulls its scripts from a CDN is blank: every asset the pages
    name is served here."""
    for page in ("/docs", "/redoc"):
        html = (await client.get(page)).text
        assets = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', html)
        assert assets, page
        assert not re.search(r"https?://", html), f"{page} reaches outside the service"
        for asset in assets:
            loaded = await client.get(asset)
            assert loaded.status_code == 200, asset
            assert len(loaded.content) > 1_000, asset
