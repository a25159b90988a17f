"""The costs' and budgets' HTTP routes."""
