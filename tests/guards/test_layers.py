"""The layers hold: the import contracts in pyproject.toml are kept by the code, each one
fails on the imports that once broke it, and the store's status writers are called only by
the run transitions."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_code_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


# Imports that went against the layers before they were enforced, each added back to the
# module it was in: the contracts must refuse every one.
BREAKS = [
    ("app/runs/engine/workers.py", "app.runs.loop.run_loop"),  # engine drove the loop directly
    ("app/runs/engine/runs.py", "app.runs.loop.prompt"),  # engine read the loop's prompt rules
    ("app/tasks/store/tasks.py", "app.tasks.engine.task_mutations"),  # the store reached up
    ("app/runs/store/conversations.py", "app.llm.tokens"),  # the store used the LLM layer
    ("app/llm/providers/registry.py", "app.agents.schemas"),  # a provider read an API shape
    ("app/llm/tokens.py", "app.events.engine.bus"),  # the LLM layer reached the engine
    ("app/runs/schemas/journal.py", "app.runs.engine.journal"),  # an API shape used the engine
    ("app/runs/schemas/journal.py", "app.runs.loop.prompt"),  # an API shape imported the loop
    ("app/tasks/engine/task_runs.py", "app.runs.api.runs"),  # an engine reached another's route
    ("app/tasks/store/tasks.py", "app.runs.engine.runs"),  # a store reached another's engine
    ("app/runs/schemas/runs.py", "app.llm.tokens"),  # an API shape imported the LLM layer
    ("app/core/states.py", "app.runs.schemas.runs"),  # the vocabulary imported an app module
    ("app/runs/loop/prompt.py", "app.http.deps"),  # the loop reached the API
    ("app/runs/api/runs.py", "app.main"),  # a router reached the composition root
    ("app/runs/ui/runs.py", "app.http.deps"),  # the dashboard borrowed the API's dependencies
    ("app/http/deps.py", "app.dashboard.deps"),  # and the other way round
]


@pytest.mark.parametrize(("module", "imported"), BREAKS)
def test_a_contract_refuses_each_import_against_the_layers(
    tmp_path: Path, module: str, imported: str
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "app", tree / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    target = tree / module
    target.write_text(target.read_text() + f"\nimport {imported}  # noqa\n")
    result = _lint(tree)
    assert result.returncode != 0, f"{module} importing {imported} broke no contract"
    assert f"{module[:-3].replace('/', '.')} -> {imported}" in result.stdout


# The store's functions that write `runs.status`, and the one module that may call them.
STATUS_WRITERS = ("set_status", "claim_runs", "release", "update_leased_many")


def test_only_the_run_transitions_call_the_stores_status_writers() -> None:
    calls = re.compile(rf"run_store\.({'|'.join(STATUS_WRITERS)})\(")
    callers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "app").rglob("*.py")
        if calls.search(path.read_text())
    )
    assert callers == ["app/runs/engine/run_transitions.py"]
