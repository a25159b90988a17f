"""Triggers: webhooks, schedules and chains that start runs and workflows."""
