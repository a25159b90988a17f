"""Loop kinds: what a run does between its start and its ending, behind one protocol.

`RunLoop` (runs/loop/run_loop.py) claims, resumes, commits and settles; the kind an agent's
`execution_loop` names drives the turns in between through the `LoopHost` it is given
(protocol.py); registry.py says which kind drives a run, auto.py how `auto` chooses.
"""
