"""The workspaces' dashboard pages."""
