"""The pure core: series ids, Redis keys (only ``keys`` builds one), slices, histograms,
HyperLogLog sketches, blocks, and work remembered by identity (``memo``). It may import only
slicecount.errors: no Redis, no framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
