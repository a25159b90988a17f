"""A service without API keys keeps other sites' pages out: a Host that is not a loopback
name (DNS rebinding) and a change asked for from another origin are refused, over a real
server; clients that are not browsers and the dashboard's own pages are not affected."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.api import assert_problem
from tests.support.server import make_settings, running_server

AGENT = {"name": "a", "model": {"provider": "scripted", "name": "s", "script": [{"text": "hi"}]}}


@pytest.fixture
async def keyless(database_url: str, clean_db: AsyncEngine) -> AsyncIterator[str]:
    settings = make_settings(database_url, server={"allowed_hosts": ["loopwright.internal"]})
    async with running_server(settings) as url:
        yield url


async def test_a_host_that_is_not_loopback_is_refused(keyless: str) -> None:
    async with httpx.AsyncClient(base_url=keyless) as http:
        port = keyless.rsplit(":", 1)[1]
        rebound = await http.get("/v1/runs", headers={"Host": f"attacker.example:{port}"})
        problem = assert_problem(rebound, 403, "host_refused")
        assert "attacker.example" in problem["detail"]
        assert (await http.get("/ui/runs", headers={"Host": "attacker.example"})).status_code == 403
        for host in (f"localhost:{port}", f"[::1]:{port}", "app.localhost", "LoopWright.Internal"):
            answered = await http.get("/v1/runs", headers={"Host": host})
            assert answered.status_code == 200, host
        # A signed webhook delivery may come through a tunnel under its public name: it
        # reaches the route (which then wants its trigger and signature).
        hook = await http.post("/v1/hooks/trg_x", json={}, headers={"Host": "abc.tunnel.example"})
        assert hook.status_code != 403


async def test_a_change_from_another_site_s_page_is_refused(keyless: str) -> None:
    async with httpx.AsyncClient(base_url=keyless) as http:
        forged = await http.post(
            "/v1/agents", json=AGENT, headers={"Origin": "https://evil.example"}
        )
        assert_problem(forged, 403, "cross_origin_refused")
        sandboxed = await http.post("/v1/agents", json=AGENT, headers={"Origin": "null"})
        assert_problem(sandboxed, 403, "cross_origin_refused")
        assert (await http.get("/v1/agents")).json()["items"] == []  # nothing was made
        # Reading is not a change (and the browser keeps another site from seeing it).
        read = await http.get("/v1/agents", headers={"Origin": "https://evil.example"})
        assert read.status_code == 200
        # The dashboard's own pages send their own origin; other clients send none.
        own = await http.post("/v1/agents", json=AGENT, headers={"Origin": keyless})
        assert own.status_code == 201, own.text
        plain = await http.post("/v1/agents", json=AGENT | {"name": "b"})
        assert plain.status_code == 201, plain.text


async def test_with_keys_the_guard_is_off(database_url: str, clean_db: AsyncEngine) -> None:
    settings = make_settings(database_url, auth={"api_keys": ["k-0123456789abcdef"]})
    async with (
        running_server(settings) as url,
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": "Bearer k-0123456789abcdef"}
        ) as http,
    ):
        made = await http.post(
            "/v1/agents",
            json=AGENT,
            headers={"Origin": "https://elsewhere.example", "Host": "service.example"},
        )
        assert made.status_code == 201, made.text
