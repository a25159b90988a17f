"""The tasks' and boards' HTTP routes."""
