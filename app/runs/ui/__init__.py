"""The runs' dashboard pages."""
