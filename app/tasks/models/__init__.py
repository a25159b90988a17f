"""The tasks' and boards' tables."""
