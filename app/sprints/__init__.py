"""Sprints: a project's time-boxed backlog of tasks, its lifecycle, its clock and its
burn-up.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
