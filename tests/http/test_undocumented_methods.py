"""A method the OpenAPI document does not list for a path is refused with a problem
document, never a server error, on every path: a 405 naming the methods that are
(`Allow`), or, where another route serves that method on the path (DELETE
/v1/tasks/events is the task `events`'s), that route's answer. `make fuzz` leaves this proof
to this test: the fuzzer's own probes of undocumented methods run in `make fuzz-deep`."""

from __future__ import annotations

import re

import httpx

from app.core.config import Settings
from app.main import create_app
from tests.support.api import assert_problem

METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "TRACE")


async def test_every_path_refuses_the_methods_it_does_not_document(
    client: httpx.AsyncClient,
) -> None:
    paths = create_app(Settings()).openapi()["paths"]
    refused = 0
    for template, operations in paths.items():
        documented = {method.upper() for method in operations}
        path = re.sub(r"\{[^}]+\}", "x0", template)
        for method in sorted(set(METHODS) - documented):
            response = await client.request(method, path)
            assert 400 <= response.status_code < 500, (method, template, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            if response.status_code != 405:
                continue  # another route's answer (a 404, a 422)
            assert_problem(response, 405, "method_not_allowed")
            refused += 1
            allowed = {m.strip() for m in response.headers["allow"].split(",")}
            # `Allow` names what any route serves on the path (also /v1/tasks/{task_id}'s
            # methods on /v1/tasks/events): the documented ones, never the refused one.
            assert documented <= allowed and method not in allowed, (method, template)
    assert refused > 300
