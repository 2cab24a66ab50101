"""PromQL, the subset slicecount answers through its Prometheus HTTP API. Pure: no Redis, no
HTTP framework.

``parser.parse`` turns a query into the tree of ``ast``; ``engine.evaluate`` computes a tree on
a grid of evaluation times over series of exact running totals (``engine.Raw``), which the
datasource reads from the slices of one precision.
"""
