"""The broker's core as a process of its own, behind the HTTP front.

HTTP parsing and validation (the front) and the services with their database
writer thread (the core) each get a GIL and a CPU of their own. In one process the
event loop keeps the GIL busy while the writer thread, which gives it up around every
SQLite step and PostgreSQL round trip, waits up to a switch interval to get it back
for each of them; see docs/benchmarks.md. ``halfmq serve`` runs this way unless
``HALFMQ_CORE_PROCESS=false``; ``app.main.create_app`` with that setting off keeps
everything in one process (tests, embedding).

- :mod:`app.core.protocol`: the frames on the socket pair between the two.
- :mod:`app.core.server`: the core process (``python -m app.core``, started by the front).
- :mod:`app.core.link`: the front's side: starting the core, calling it, the broker proxy.
"""
