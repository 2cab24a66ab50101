"""The pure core: series ids, Redis keys (only ``keys`` builds one), slices, histograms and
HyperLogLog sketches. It may import only slicecount.errors: no Redis, no framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
