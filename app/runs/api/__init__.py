"""The runs' HTTP routes."""
