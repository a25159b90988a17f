"""Tools the agent loop can call: one factory with fail-closed defaults, the registry, the
built-ins, `http_request`, the journal tools and agents' MCP servers. The tools of other
domains (tasks, coordination, workspaces) are in their own `tools` module."""
