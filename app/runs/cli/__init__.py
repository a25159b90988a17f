"""The runs' command-line resources: runs (`runs.py`, following one with `follow.py` and
`render.py`) and the tools their agents may use (`tools.py`)."""
