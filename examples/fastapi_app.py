"""Re-export of ``slicecount.examples.fastapi_app`` (see ``flask_app.py`` beside this)."""

from slicecount.examples.fastapi_app import app, create_app

__all__ = ["app", "create_app"]
