"""Re-export of ``slicecount.examples.starlette_app`` (see ``flask_app.py`` beside this)."""

from slicecount.examples.starlette_app import app

__all__ = ["app"]
