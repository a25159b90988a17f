"""The workflows' shapes the API reads and writes."""
