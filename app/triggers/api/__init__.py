"""The triggers' HTTP routes."""
