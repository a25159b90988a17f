"""The event streams' HTTP routes."""
