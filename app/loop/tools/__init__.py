"""Tools the agent loop can call: one factory with fail-closed defaults, and built-ins."""
