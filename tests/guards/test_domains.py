"""A room per domain: each domain of `app/` holds only the layers every domain names alike,
and imports only the domains it declares here (docs/architecture.md draws the same map).
A new dependency between domains is a decision: add it below, or move the code instead."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import grimp

APP = Path(__file__).resolve().parents[2] / "app"

# The inner layers, top to bottom (pyproject.toml's contracts hold their order).
LAYERS = {"cli", "api", "ui", "loop", "tools", "engine", "store", "repo", "models", "schemas"}

DEPENDS_ON: dict[str, set[str]] = {
    "agents": {"runs"},
    "approvals": {"events", "runs", "tasks", "workflows", "workspaces"},
    "coordination": {
        "agents",
        "approvals",
        "costs",
        "events",
        "routing",
        "runs",
        "tasks",
        "workflows",
    },
    "costs": {"events", "runs", "tasks"},
    "events": {
        "approvals",
        "coordination",
        "costs",
        "runs",
        "sprints",
        "tasks",
        "webhooks",
        "workflows",
        "workspaces",
    },
    "routing": {"agents", "costs", "tasks"},
    "runs": {"agents", "approvals", "costs", "events", "tasks", "triggers", "webhooks"},
    "sprints": {"events", "tasks"},
    "tasks": {
        "agents",
        "approvals",
        "coordination",
        "events",
        "runs",
        "sprints",
        "workflows",
        "workspaces",
    },
    "triggers": {"agents", "events", "runs", "sprints", "webhooks", "workflows"},
    "webhooks": {"events"},
    "workflows": {"coordination", "events", "runs", "sprints", "tasks", "triggers"},
    "workspaces": {"agents", "approvals", "events", "runs", "tasks"},
}


def _imported_domains() -> dict[str, set[str]]:
    graph = grimp.build_graph("app")
    found: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        domain = module.split(".")[1] if module.count(".") else ""
        if domain not in DEPENDS_ON:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            other = imported.split(".")[1] if imported.count(".") else ""
            if other in DEPENDS_ON and other != domain:
                found[domain].add(other)
    return found


def test_every_domain_is_a_folder_of_the_same_layers() -> None:
    domains = {p.name for p in APP.iterdir() if p.is_dir() and p.name in DEPENDS_ON}
    assert domains == set(DEPENDS_ON)
    for domain in sorted(domains):
        rooms = {
            p.stem for p in (APP / domain).iterdir() if p.name not in ("__init__.py", "__pycache__")
        }
        assert rooms <= LAYERS, f"app/{domain} holds {sorted(rooms - LAYERS)}: not a layer"


def test_each_domain_imports_only_the_domains_it_declares() -> None:
    found = _imported_domains()
    undeclared = {
        d: sorted(found[d] - DEPENDS_ON[d]) for d in DEPENDS_ON if found[d] - DEPENDS_ON[d]
    }
    assert not undeclared, f"imports between domains not declared in DEPENDS_ON: {undeclared}"
    stale = {d: sorted(DEPENDS_ON[d] - found[d]) for d in DEPENDS_ON if DEPENDS_ON[d] - found[d]}
    assert not stale, f"declared in DEPENDS_ON but no longer imported (remove them): {stale}"
