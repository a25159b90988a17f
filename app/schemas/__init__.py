"""API shapes, one module per resource."""
