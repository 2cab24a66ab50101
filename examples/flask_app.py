"""The example Flask app lives in the package (``slicecount.examples.flask_app``) so that the
demo and the container image can run it; this file keeps ``--chdir examples flask_app:app``
working."""

from slicecount.examples.flask_app import app, create_app

__all__ = ["app", "create_app"]
