"""A chaos campaign against scaled-out workers, with its invariants checked after every round.

Each round starts an embedded broker and three ``eddies worker`` processes in one group
(every role in each, or orchestrators and executors apart), feeds inputs to an agent whose
every side effect writes a line to a file, SIGKILLs a random worker every few seconds and
restarts it (at once in its slot, later in it, or later in a new slot), SIGSTOPs one past
its session timeout now and then, and cuts one off the broker (``netcut``: each worker in
a network namespace of its own), then lets every slot drain the backlog and checks
(``chaos.checks``): each input has exactly one answer, no completed non-idempotent call
ran twice and every UNKNOWN outcome is one a kill, pause or cut of its claimant explains,
no session is stuck, no worker died on its own. A ``+slow`` round (``--layouts all+slow``)
adds a slow provider (``chaos.provider``: answers after 0.5-3 s) and waves of inputs whose
model calls go to it, hundreds in flight at once on the executors' event loops, and checks
from its log of requests that no model call was asked again after its outcome was journaled.

Run from the repository: ``make chaos`` (three rounds of two minutes: all, split, all+slow),
or ``PYTHONPATH=tools .venv/bin/python -m chaos --rounds 5 --round-seconds 240 --seed 1512
--layouts all,split`` for the run in ``bench/RESULTS.md``. Exit status 1 when an invariant
failed; each round's ``report.json`` lists what failed and the evidence.
"""
