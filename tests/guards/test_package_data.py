"""The dashboard's templates and static files, and the built-in workflow templates, ship
with the code: each one is named by the package data of `pyproject.toml` (a wheel holds
only what it names), and the image copies `app/` whole, none of them left out by
`.dockerignore`."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "app" / "dashboard"
WORKFLOW_TEMPLATES = ROOT / "app" / "workflows" / "engine" / "templates"


def test_every_template_and_static_file_is_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = project["tool"]["setuptools"]["package-data"]["app.dashboard"]
    files = [
        path.relative_to(UI).as_posix()
        for folder in ("templates", "static")
        for path in (UI / folder).rglob("*")
        if path.is_file()
    ]
    assert files, "the dashboard has no templates or static files?"
    left_out = [name for name in files if not any(fnmatch.fnmatch(name, g) for g in globs)]
    assert not left_out, f"not in the wheel: {left_out}"


def test_every_builtin_workflow_template_is_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = project["tool"]["setuptools"]["package-data"]["app.workflows.engine.templates"]
    files = [
        path.relative_to(WORKFLOW_TEMPLATES).as_posix()
        for path in (WORKFLOW_TEMPLATES / "builtin").rglob("*")
        if path.is_file()
    ]
    assert files, "no built-in workflow templates?"
    left_out = [name for name in files if not any(fnmatch.fnmatch(name, g) for g in globs)]
    assert not left_out, f"not in the wheel: {left_out}"


def test_the_image_gets_the_dashboard_files() -> None:
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    shipped = [*UI.rglob("*.html"), *UI.rglob("*.css"), *UI.rglob("*.js")]
    for path in [*shipped, *WORKFLOW_TEMPLATES.rglob("*.yaml")]:
        relative = path.relative_to(ROOT).as_posix()
        assert not [p for p in ignored if fnmatch.fnmatch(relative, p)], relative
