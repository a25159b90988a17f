"""The tasks' and boards' dashboard pages."""
