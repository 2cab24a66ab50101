"""The datasource service: HTTP only. The app (``app``, ``serving``, ``auth``, ``health``,
``body``, ``render``, ``numbers``, ``openapi``), the two query surfaces side by side
(``simpod/``: Grafana's JSON protocol; ``prometheus/``: the Prometheus HTTP API) and the
built-in page (``ui/``). Both surfaces run the one query loop (``slicecount.query``) on the
one reader of the store (``slicecount.reads``).

It may import query/, reads/, promql/, store/, operations/, core/, config and errors, and
starlette, uvicorn and anyio; never recording/ or the middleware (it reads, it does not count).

The whole house, and what each layer may import: docs/architecture.md.
"""
