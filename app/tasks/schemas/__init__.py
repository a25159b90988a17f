"""The tasks' and boards' shapes the API reads and writes."""
