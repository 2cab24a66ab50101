"""``slicecount demo``: the whole stack on this machine (``stack``), the processes it runs
(``services``) and the file that finds its Redis (``state``). It may import anything below the
command line.

The whole house, and what each layer may import: docs/architecture.md.
"""
