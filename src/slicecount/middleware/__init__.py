"""Framework shells (WSGI, ASGI, Flask, Starlette, SQLAlchemy) around one pure core, and the
throttle's HTTP face: ``Throttle`` (which limits a request meets, the 429) and the ``limit``
decorator.

It may import throttle/, recording/, store/, core/, config and errors, and each shell its own
framework.

The whole house, and what each layer may import: docs/architecture.md.
"""
