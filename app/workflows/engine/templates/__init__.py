"""Workflow templates: built-in definitions of each workflow kind, written as YAML in
`builtin/` with typed variables (`catalogue.py`), and their instantiation into a definition
with the board defaults put into effect (`instantiate.py`)."""
