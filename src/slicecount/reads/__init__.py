"""The datasource's reads of the store: the one ``Reader`` (discovery cached, slices read in
chunks a few at a time), how concurrent requests share reads and take turns (``sharing``),
the blocks' frames decoded in bulk (``decoding``), and the record of a discovered series
(``listing``).

It may import store/ (the only way it talks to Redis), operations/, core/, config and
errors; never the query loop or HTTP.

The whole house, and what each layer may import: docs/architecture.md.
"""
