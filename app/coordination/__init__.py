"""Coordination: a task split into a DAG of subtasks that other agents run in waves, and
rolled back up into its parent.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
