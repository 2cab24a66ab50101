"""Framework shells (WSGI, ASGI, Flask, Starlette, SQLAlchemy) around one pure core, and the
throttle's HTTP face: ``Throttle`` (which limits a request meets, the 429) and the ``limit``
decorator."""
