"""The workflows' dashboard pages."""
