"""The ``slicecount`` command line: the group and its commands (``commands``, the only module
that configures logging) and the Settings options they share (``options``). It may import
anything below it; only ``console`` (the script) and ``python -m slicecount.cli`` run it.

The whole house, and what each layer may import: docs/architecture.md.
"""

from slicecount.cli.commands import main as main
