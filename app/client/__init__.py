"""The terminal client behind `loopwright`'s verbs: plain HTTP against a running server
(`http.py`), a run's events printed as they come (`render.py`, `follow.py`), and the
verbs themselves (`verbs.py`)."""
