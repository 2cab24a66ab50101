"""PromQL, the one query engine of both surfaces (the Prometheus HTTP API and the simPod targets,
which compile to its tree). Pure: no Redis, no HTTP framework.

``parser.parse`` turns a query into the tree of ``ast``; ``engine.evaluate`` computes a tree on
a grid of evaluation times over series of exact running totals (``arrays.Table``, or
``values.Raw`` one by one), which the datasource reads from the slices of one precision.

It may import core/ and errors (google-re2 for regex matchers, numpy for the evaluation's
arrays: the parser loads without it): the one engine both query surfaces compile to.

The whole house, and what each layer may import: docs/architecture.md.
"""
