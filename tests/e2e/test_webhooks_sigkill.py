"""A webhook delivery survives a SIGKILL of the real `loopwright serve`: the event's
delivery was committed with the event, its first attempt was in flight (the receiver held
it) when the process died, and the restarted process sends it once the dead attempt's lease
has run out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.receiver import Answer, receiver
from tests.webhooks.test_webhooks_out import settled_log

# Timing: an attempt's lease running out after a SIGKILL.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]

LEASE_S = 3


async def test_a_delivery_cut_short_by_sigkill_is_sent_after_the_restart(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    env = {
        "LOOPWRIGHT_WEBHOOKS__ALLOWED_NETWORKS": '["127.0.0.0/8"]',
        "LOOPWRIGHT_WEBHOOKS__TIMEOUT_S": "2",
        "LOOPWRIGHT_WEBHOOKS__LEASE_S": str(LEASE_S),
    }
    async with receiver() as hooks:
        hooks.plan(Answer(hold=asyncio.Event()))  # never answered: the process dies first
        with Cluster(database_url, tmp_path, env) as cluster:
            server = cluster.server("serve", workers=True)
            async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
                webhook = (
                    await http.post(
                        "/v1/webhooks",
                        json={"url": hooks.hook(), "event_types": ["agent_run.completed"]},
                    )
                ).json()
                agent = await http.post(
                    "/v1/agents",
                    json={
                        "name": "quick",
                        "model": {"provider": "scripted", "name": "s", "script": [{"text": "hi"}]},
                    },
                )
                started = {"agent_id": agent.json()["id"], "input": "go"}
                run = (await http.post("/v1/runs", json=started)).json()
                settled = await http.get(f"/v1/runs/{run['id']}/wait", params={"timeout_s": 20})
                assert settled.json()["status"] == "completed"
            [first] = await hooks.wait_for(1)  # attempt 1 is in flight, held
            server.kill()

            async with clean_db.connect() as conn:
                row = (
                    await conn.execute(text("SELECT status, attempts FROM webhook_deliveries"))
                ).one()
            assert tuple(row) == ("pending", 1)  # the attempt's outcome died with the process

            server.start()
            [_, second] = await hooks.wait_for(2)  # after the dead attempt's lease
            assert second.delivery_id == first.delivery_id
            assert second.signed_by(webhook["secret"]) and second.body == first.body
            assert second.json["data"]["run_id"] == run["id"]

            async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
                await settled_log(http, webhook["id"])
                path = f"/v1/webhooks/{webhook['id']}/deliveries/{first.delivery_id}"
                delivery = (await http.get(path)).json()
            assert (delivery["status"], delivery["attempts"]) == ("succeeded", 2)
            assert [a["attempt"] for a in delivery["attempt_log"]] == [2]
