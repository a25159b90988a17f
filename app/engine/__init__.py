"""Behaviour over time: the TaskEngine writer, the event bus and its Postgres listener."""
