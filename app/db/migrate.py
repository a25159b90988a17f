"""Applies Alembic migrations from code, under an advisory lock so that several processes
starting at once against one database migrate it exactly once.

A database already at the head revision (every restart but the first after an upgrade) is
recognised by one query, without loading Alembic: its import is a tenth of a start-up."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ROOT / "migrations" / "versions"
_LOCK_KEY = 0x4C57_4D49  # "LWMI"
# The lines Alembic's template (migrations/script.py.mako) writes in every revision file.
_REVISION = re.compile(r"^revision = (['\"])(\w+)\1$", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision = (?:None|(['\"])(\w+)\1)$", re.MULTILINE)


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str | None:
    """The revision no other revision file builds on, read from the files' own lines; None
    (Alembic decides) unless there is one such revision and every file says its revision
    and the one it builds on plainly (a merge names several: None)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS.glob("*.py"):
        source = path.read_text()
        revision, down = _REVISION.findall(source), _DOWN_REVISION.findall(source)
        if len(revision) != 1 or len(down) != 1:
            return None
        revisions.add(revision[0][1])
        if down[0][1]:
            parents.add(down[0][1])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _current_revision(connection: Connection) -> str | None:
    if connection.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _run(connection: Connection, action: str, revision: str) -> None:
    from alembic import command

    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    config = alembic_config(connection)
    if action == "upgrade":
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    if revision == "head" and head_revision() is not None:
        async with engine.connect() as conn:
            if await conn.run_sync(_current_revision) == head_revision():
                return
    async with engine.begin() as conn:
        await conn.run_sync(_run, "upgrade", revision)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(_run, "downgrade", revision)
