"""Triggers: webhooks in, schedules and chains that start runs and workflow executions,
and their fire log.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
