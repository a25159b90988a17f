"""The costs' and budgets' shapes the API reads and writes."""
