"""The workflows' HTTP routes."""
