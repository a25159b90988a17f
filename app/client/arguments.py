"""What the verbs take from the command line beyond plain strings: a count, a file of
YAML or JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.client.exits import Exit
from app.client.http import ClientError


def count(value: str) -> int:
    """An argparse `type`: a whole number from 1."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1")
    return int(value)


def load_file(path: Path) -> Any:
    """A document (an agent, subtasks) from a YAML or JSON file (JSON is YAML too)."""
    import yaml  # here: the other verbs start without it

    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror}", Exit.USAGE) from exc
    except yaml.YAMLError as exc:
        raise ClientError(f"{path} is not YAML or JSON: {exc}", Exit.USAGE) from exc
