"""Framework shells (WSGI, ASGI, Flask, Starlette, Django, SQLAlchemy) around one pure
mapping of a request to its counts (``mapping``, what every shell shares in ``shell``), and the
throttle's HTTP face: ``Throttle`` (which limits a request meets, the 429) and the ``limit``
decorator.

It may import throttle/, recording/, store/, core/, config and errors, and each shell its own
framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
