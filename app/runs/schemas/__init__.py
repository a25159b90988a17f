"""The runs' shapes the API reads and writes."""
