"""The costs' and budgets' tables."""
