"""Framework shells (WSGI, ASGI, Flask, Starlette, SQLAlchemy) around one pure core."""
