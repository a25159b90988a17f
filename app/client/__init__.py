"""The command line's shell, shared by every resource's verbs (`app/<domain>/cli`): plain
HTTP against a running server (`http.py`), how a verb joins the command and exits
(`commands.py`, `exits.py`), what it prints (`output.py`) and reads (`arguments.py`)."""
