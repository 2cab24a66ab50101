"""The datasource service: HTTP only around the one query loop. The simPod JSON protocol
(``app``, ``endpoints``, ``protocol``, ``frames``, the ``targets`` front end and its
``rewrites``), the Prometheus HTTP API (``prometheus/``), the built-in page (``ui/``), and the
loop both surfaces share: plan, discover, check (``planning``), read (``reader``, the one owner
of the store here) and evaluate (``execute``).

It may import promql/, store/, operations/, core/, config and errors, and starlette, uvicorn
and anyio; never recording/ or the middleware (it reads, it does not count).

The whole house, and what each layer may import: docs/architecture.md.
"""
