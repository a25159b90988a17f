"""Loopwright: durable LLM agent loops and task workflows on Postgres."""
