"""The one query loop both surfaces run: PromQL trees planned (``precision`` chooses the
precision and grid, ``catalogue`` says which stored metric a name reads, ``uniques`` plans the
unions of unique series), their series discovered and charged against the limits
(``planning``, ``budget``), then read, evaluated (``tables``, ``subtrees``,
``distinct_times``) and encoded (``execute``).

It asks the storage only what ``queryable.Queryable`` says, as Prometheus's engine asks a
``storage.Queryable``: no HTTP framework and no Redis command here. It may import reads/
(the record of a series and of a read), promql/, operations/ (a union's group), core/,
config and errors.

The whole house, and what each layer may import: docs/architecture.md.
"""
