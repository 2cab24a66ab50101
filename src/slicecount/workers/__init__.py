"""Task workers: Celery (``slicecount.workers.celery.instrument``) and RQ
(``slicecount.workers.rq.Worker``) count every run into ``tasks.runs``, ``tasks.duration`` and
``tasks.queue_wait``, exactly across their worker processes. One pure mapping (``runs``) and
where its counts go (``counting``), under a thin shell a task queue.

It may import recording/, store/, core/, config and errors, and each shell its task queue: no
web framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
