"""Shared fixtures: a real Postgres (TEST_DATABASE_URL, else a local server on
127.0.0.1:5432, else the embedded one) and real HTTP servers running the app.

The suite runs in parallel (pytest-xdist, `-n auto` in `make test`). The databases:
- one template, migrated once per test run by the controlling process (or the only one);
- per worker, two clones of it: the *shared* database, behind one server per worker that
  the API tests talk to (`base_url`, `client`), never emptied, so each test works on the
  data it creates (its own agents, lanes, projects); and the *private* database, emptied
  before each test that asks for it (`clean_db`): the engine and scenario tests, the
  end-to-end processes and the servers a test starts itself run their own workers there,
  which must not claim the shared server's runs (nor it theirs).
A test module whose server is its own (its settings differ, or it stops or restarts the
server) marks itself `own_server`: its `base_url` is then a private server on the private
database, started for each test with the module's `settings`.

Tests are filed by what they test, as `app/` is (`tests/<domain>/`, the kernel's and the
shell's folders), beside `tests/e2e` (real processes), `tests/ui` (a real browser) and
`tests/guards`. Fixtures for a TaskEngine on the private database, for a store session
rolled back after each test, and for the scripted-run harness are plugins any test may use
(`tests/support/engine_fixtures.py`, `store_fixtures.py`, `scenario_fixtures.py`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.db.connection import make_engine
from tests.support.database import clone, create_template, drop, empty_tables, server_url
from tests.support.server import make_settings, running_server, serving_in_thread

pytest_plugins = [
    "tests.support.engine_fixtures",
    "tests.support.store_fixtures",
    "tests.support.scenario_fixtures",
]

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
TEMPLATE = "lw_template"  # config.stash key, and xdist's workerinput key


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller migrates the template before xdist starts the workers."""
    config = session.config
    if _is_worker(config) or config.option.collectonly:
        return
    url = server_url()
    config.stash[_SERVER] = url
    config.stash[_TEMPLATE] = asyncio.run(create_template(url))


def pytest_sessionfinish(session: pytest.Session) -> None:
    template = session.config.stash.get(_TEMPLATE, None)
    if template is not None:
        asyncio.run(drop(session.config.stash[_SERVER], template))


class _Xdist:
    """Hands the template's server and name to each worker."""

    @staticmethod
    def pytest_configure_node(node: object) -> None:
        config: pytest.Config = node.config  # type: ignore[attr-defined]
        node.workerinput[TEMPLATE] = config.stash[_TEMPLATE]  # type: ignore[attr-defined]
        node.workerinput["lw_server"] = config.stash[_SERVER]  # type: ignore[attr-defined]


_SERVER = pytest.StashKey[str]()
_TEMPLATE = pytest.StashKey[str]()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker a core and one more. A test often waits (on a server, a stream,
    a child process, a lease), so a worker a core leaves the cores idle; under coverage the
    suite is CPU-bound, and four workers on two cores starved the end-to-end tests'
    processes past their deadlines (docs/testing.md)."""
    return (os.cpu_count() or 1) + 1


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist") and not _is_worker(config):
        config.pluginmanager.register(_Xdist())


E2E = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs the `e2e` tests from tests/e2e only (collecting the whole suite to
    pick out a few costs half a minute), and an `alone` test as an `e2e` one that runs by
    itself: any other would run in no phase of it, or in two."""
    misplaced = [
        i.nodeid
        for i in items
        if (i.get_closest_marker("e2e") and E2E not in i.path.parents)
        or (i.get_closest_marker("alone") and not i.get_closest_marker("e2e"))
    ]
    if misplaced:
        raise pytest.UsageError(f"`e2e` tests live in tests/e2e, `alone` ones are e2e: {misplaced}")


def _template(config: pytest.Config) -> tuple[str, str]:
    if _is_worker(config):
        given = config.workerinput  # type: ignore[attr-defined]
        return given["lw_server"], given[TEMPLATE]
    return config.stash[_SERVER], config.stash[_TEMPLATE]


@pytest.fixture(scope="session")
def pg_server_url(pytestconfig: pytest.Config) -> str:
    return _template(pytestconfig)[0]


def _database(config: pytest.Config, role: str) -> Iterator[str]:
    server, template = _template(config)
    name = f"{template}_{WORKER}_{role}"
    yield asyncio.run(clone(server, template, name))
    asyncio.run(drop(server, name))


@pytest.fixture(scope="session")
def private_database_url(pytestconfig: pytest.Config) -> Iterator[str]:
    yield from _database(pytestconfig, "private")


@pytest.fixture(scope="session")
def shared_database_url(pytestconfig: pytest.Config) -> Iterator[str]:
    yield from _database(pytestconfig, "shared")


@pytest.fixture(scope="session")
def shared_server(shared_database_url: str) -> Iterator[str]:
    """This worker's server, on the shared database, for the whole session."""
    with serving_in_thread(make_settings(shared_database_url)) as url:
        yield url


def _on_shared_server(request: pytest.FixtureRequest) -> bool:
    return "base_url" in request.fixturenames and not request.node.get_closest_marker("own_server")


@pytest.fixture
def database_url(request: pytest.FixtureRequest) -> str:
    """The database of the server the test talks to: the shared one for a test on the
    shared server (to read or arrange rows behind it), else the private one."""
    if _on_shared_server(request):
        return str(request.getfixturevalue("shared_database_url"))
    return str(request.getfixturevalue("private_database_url"))


@pytest.fixture
async def db_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def clean_db(
    request: pytest.FixtureRequest, database_url: str, db_engine: AsyncEngine
) -> AsyncEngine:
    """Empty tables, for tests that commit on the private database (engine, scenario and
    end-to-end tiers, private servers)."""
    if _on_shared_server(request):
        pytest.fail("a test on the shared server works on its own data: it empties nothing")
    await empty_tables(database_url)
    return db_engine


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
async def private_base_url(settings: Settings, clean_db: AsyncEngine) -> AsyncIterator[str]:
    """A server of the test's own, with its module's `settings`, on the emptied private
    database; stopped when the test ends."""
    async with running_server(settings) as url:
        yield url


@pytest.fixture
def base_url(request: pytest.FixtureRequest) -> str:
    """The shared server, or a private one in an `own_server` module."""
    if request.node.get_closest_marker("own_server"):
        return str(request.getfixturevalue("private_base_url"))
    return str(request.getfixturevalue("shared_server"))


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    # Longer than the 20 s a `/wait` is asked to hold (`factories.settle`).
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        yield http
