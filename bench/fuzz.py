"""`make fuzz`: schemathesis against a live server: no server error, and the schema tells
the truth about the API.

The server runs in this process on a free loopback port, on a scratch database made (and
dropped) here, on TEST_DATABASE_URL or else the local Postgres. The run is bounded and
repeatable: a fixed seed, a number of examples per operation, and a time limit past which
it counts as failed. Endpoints that stream (SSE `…/events`) or wait on purpose (`…/wait`)
are left out: they answer over minutes, not per request.

A failure is any of (schemathesis's checks):
- a 5xx (`not_a_server_error`);
- a status code the operation does not document (`status_code_conformance`), a response
  whose content type or body breaks the schema (`content_type_conformance`,
  `response_schema_conformance`);
- a request that fits the schema and is refused anyway (`positive_data_acceptance`): a
  rule the server enforces and the schema does not state. The few rules JSON Schema
  cannot state are in the operations' descriptions, and `fuzz_hooks.py` makes generated
  requests keep them (each is named there: agents' tool names are the ones the server
  lists, for one); activating a workflow also depends on the
  stored definition being valid, so a 422 `workflow_invalid` is expected there, and
  adding tasks to a sprint on the tasks being stored (of its project, still open),
  instantiating a template on its own variables, and setting a workspace on a git
  repository existing on the server's disk.
Two depths. `make fuzz` (CI) is bounded to six minutes: the schema's examples; the
coverage phase (every boundary and every invalid value each keyword of the schema allows,
for every operation: deterministic) without its probes of undocumented HTTP methods
(`tests/http/test_undocumented_methods.py` proves those are refused with a problem
document) and with only the valid boundaries of the three largest create bodies; and the
fuzzing phase at 8 examples per operation, valid and invalid. Two schemathesis workers keep
both the server's core and the fuzzer's busy. `make fuzz-deep` (`--deep`) adds what the
bounded run leaves out and the stateful phase (sequences of calls linked by the schema),
at 50 examples per operation, within an hour: for people, before a release or after a
schema change.
`FUZZ_PHASES=examples` runs one phase of schemathesis's (a check of the schema's
examples in seconds). Strings are generated without NUL characters, which the API
refuses everywhere (Postgres cannot store them; the README says so). The report names
each failure with a curl line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import sys
import time
from pathlib import Path

import httpx
import uvicorn
from common import admin, log, with_database

from app.core.config import Settings
from app.core.net import listening_socket
from app.db import migrate
from app.db.connection import make_engine
from app.main import create_app

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
EXCLUDED_PATHS = r"/events$|/wait$"
HOOKS = Path(__file__).with_name("fuzz_hooks.py")
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
)
# Bounded: the undocumented-methods probes of the coverage phase are left to `--deep`, and
# so are the coverage phase's invalid bodies of the three largest create bodies (agents,
# triggers, tasks: 2,900 of its cases, over half; the fuzzing phase sends them invalid
# bodies too).
BOUNDED = """
[phases.coverage]
unexpected-methods = []

[[operations]]
include-operation-id-regex = "^create_(agent|trigger|task)$"
phases.coverage.generation.mode = "positive"
"""
# The checks are chosen here, not with --checks: a check named on the command line would
# win over an operation's own setting below.
# Operations whose documented answer to a schema-valid request may depend on stored state
# beyond existence (404) and versions (409); and one body schemathesis cannot read as sent.
CONFIG = "[checks]\nenabled = false\n" + "".join(f"{check}.enabled = true\n" for check in CHECKS)
CONFIG += """
[[operations]]
include-operation-id = "activate_workflow"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# A sprint's tasks must exist, be of its project and still open (the description says so):
# stored state that generated task ids cannot know.
[[operations]]
include-operation-id = "add_sprint_tasks"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# A template's variables are its own (the path names the template): one template's are
# another's unknown variables.
[[operations]]
include-operation-id = "instantiate_workflow_template"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# A workspace's repository must be a git repository on the server's disk, with the branch.
[[operations]]
include-operation-id = "put_workspace"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# A history cursor is a step of that run's history: another string is not one of its pages.
[[operations]]
include-operation-id = "list_run_history"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# The export is YAML text (schema: a string). Schemathesis parses a YAML body and checks the
# parsed mapping against that schema instead; the test suite checks the export's text.
[[operations]]
include-operation-id = "export_workflow"
checks.response_schema_conformance.enabled = false
"""


async def _migrated_database(server_url: str, name: str) -> str:
    await admin(server_url, f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    engine = make_engine(url)
    try:
        await migrate.upgrade(engine)
    finally:
        await engine.dispose()
    return url


def _write_config(report_dir: Path, deep: bool) -> Path:
    report_dir.mkdir(parents=True, exist_ok=True)
    config = report_dir / "schemathesis.toml"
    # Global phase settings go before the [[operations]] tables (TOML: after a table
    # header, keys belong to it).
    config.write_text(CONFIG if deep else BOUNDED + CONFIG)
    return config


async def _tool_names(base_url: str) -> str:
    """The names `GET /v1/tools` lists, for the hook that keeps agents' tool names known."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.get("/v1/tools")
        response.raise_for_status()
        return ",".join(tool["name"] for tool in response.json())


async def _fuzz(base_url: str, args: argparse.Namespace) -> int:
    schemathesis = Path(sys.executable).with_name("schemathesis")
    config = await asyncio.to_thread(_write_config, Path(args.report_dir), args.deep)
    phases = "examples,coverage,fuzzing" + (",stateful" if args.deep else "")
    command = [
        str(schemathesis),
        f"--config-file={config}",
        "run",
        f"{base_url}/openapi.json",
        "--generation-allow-x00=false",
        f"--phases={os.environ.get('FUZZ_PHASES', phases)}",
        f"--seed={args.seed}",
        f"--max-examples={args.max_examples or (50 if args.deep else 8)}",
        "--generation-database=none",
        "--workers=2",
        "--request-timeout=15",
        f"--exclude-path-regex={EXCLUDED_PATHS}",
        "--report=junit",
        f"--report-dir={args.report_dir}",
        "--no-color",
        *args.schemathesis_args,
    ]
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": str(HOOKS),
        "LOOPWRIGHT_FUZZ_TOOLS": await _tool_names(base_url),
    }
    time_limit_s = args.time_limit_s or (3_600.0 if args.deep else 360.0)
    process = await asyncio.create_subprocess_exec(*command, env=env)
    try:
        return await asyncio.wait_for(process.wait(), timeout=time_limit_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        log(f"fuzz: stopped at the time limit ({time_limit_s:.0f} s); counted as failed")
        return 1


async def main(args: argparse.Namespace) -> int:
    server_url = os.environ.get("TEST_DATABASE_URL", LOCAL_SERVER)
    name = f"lw_fuzz_{secrets.token_hex(4)}"
    database_url = await _migrated_database(server_url, name)
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    settings = Settings.model_validate({"database": {"url": database_url}})
    config = uvicorn.Config(create_app(settings), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    started = time.monotonic()
    try:
        while not server.started:
            if serving.done():
                serving.result()
                raise RuntimeError("the server stopped during start-up")
            await asyncio.sleep(0.05)
        code = await _fuzz(f"http://127.0.0.1:{port}", args)
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await serving
        sock.close()
        await admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    log(f"fuzz: {'passed' if code == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return code


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--deep", action="store_true", help="`make fuzz-deep` (see above)")
    parser.add_argument("--max-examples", type=int, help="per operation (8; 50 with --deep)")
    parser.add_argument("--time-limit-s", type=float, help="failed past it (360; 3,600 --deep)")
    parser.add_argument("--report-dir", default="fuzz-report")
    parser.add_argument(
        "schemathesis_args", nargs="*", help="more options for `schemathesis run`, after `--`"
    )
    sys.exit(asyncio.run(main(parser.parse_args())))
