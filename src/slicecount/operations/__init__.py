"""The pure operations a store runs: each checks its arguments and yields command batches (writing,
reading, annotating, trimming, resharding, unique counts). They may import core/, config and
errors: no Redis, no framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
