"""The write path: the Recorder, its admission, buffers, outbox and flusher, the process hooks, the
counted losses and the process-wide default. It may import store/, operations/, core/, config
and errors: no framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
