"""Per-request overhead of the Django middleware, in-process (Django's WSGI handler called
directly, no sockets), beside django-prometheus on the same trivial view in the same run.

    python benchmarks/bench_django.py [--requests 3000] [--rounds 25] [--json]

Four handlers of one site: bare, with a middleware that does nothing (what Django charges for
one), with slicecount's middleware first in ``MIDDLEWARE``, and with django-prometheus's
``PrometheusBeforeMiddleware`` first and ``PrometheusAfterMiddleware`` last (its documented
set-up). Overhead = variant - bare, in microseconds per request, each round the four in turn;
slicecount's flush to Redis is inside its timed region, and every request must land in Redis.
Target (issue 31): slicecount's overhead <= 0.3x django-prometheus's.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import django
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse
from django.test.utils import override_settings
from django.urls import path
from werkzeug.test import EnvironBuilder

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import Recorder, Store, parse_series
from slicecount.embedded import EmbeddedRedis
from wsgi_requests import time_wsgi

OURS = "slicecount.middleware.django.SliceCountMiddleware"
THEIRS = (
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
)


class Passthrough:
    """A middleware that does nothing: what Django itself charges for one more."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)


def user(request: HttpRequest, user_id: int) -> HttpResponse:
    return HttpResponse("user")


urlpatterns = [path("users/<int:user_id>/", user)]


def handlers(recorder: Recorder) -> dict[str, WSGIHandler]:
    """The three handlers, each with its own middleware (Django reads MIDDLEWARE when a
    handler loads it)."""
    variants = {
        "bare": [], "empty middleware": [f"{__name__}.Passthrough"], "slicecount": [OURS],
        "django-prometheus": [THEIRS[0], THEIRS[1]],
    }  # fmt: skip
    built = {}
    for name, middleware in variants.items():
        with override_settings(MIDDLEWARE=middleware, SLICECOUNT={"recorder": recorder}):
            built[name] = WSGIHandler()
    return built


ENVIRON = EnvironBuilder(path="/users/7/").get_environ()
"""The request every variant serves: the trivial view."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=25)
    json_flag(parser)
    args = parser.parse_args()
    settings.configure(
        ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"], DEBUG=False, MIDDLEWARE=[],
        INSTALLED_APPS=["django_prometheus"], USE_I18N=False, LOGGING_CONFIG=None,
    )  # fmt: skip
    django.setup()

    with EmbeddedRedis() as server, Store.from_url(server.url) as store:
        recorder = Recorder(store, flush_interval=1.0)
        apps = handlers(recorder)
        timings: dict[str, list[float]] = {name: [] for name in apps}
        for _ in range(args.rounds):
            for name, app in apps.items():
                after = recorder.flush if name == "slicecount" else None
                timings[name].append(time_wsgi(app, ENVIRON, args.requests, after=after))
        recorder.close()
        sent = args.requests * args.rounds
        landed = sum(
            n
            for sid in store.series("http.requests", 86400)
            for n in (v for _, v in store.get("http.requests", 86400, parse_series(sid)[1]))
        )
    # the least disturbed round of each (timeit's advice on shared machines); medians beside
    best = {name: min(values) for name, values in timings.items()}
    med = {name: statistics.median(values) for name, values in timings.items()}
    over = {name: best[name] - best["bare"] for name in best}
    print(f"Django: microseconds per request, best of {args.rounds} rounds (median)")
    for name in apps:
        extra = "" if name == "bare" else f"  overhead {over[name]:6.1f} us"
        print(f"  {name:<18} {best[name]:7.1f} us ({med[name]:7.1f}){extra}")
    ratio = (
        over["slicecount"] / over["django-prometheus"] if over["django-prometheus"] > 0 else None
    )
    if ratio is not None:
        print(f"  slicecount overhead / django-prometheus overhead: {ratio:.2f}x (target <= 0.3x)")
    print(f"requests through slicecount: {sent:,}; counted in Redis: {landed:,}")
    if landed != sent:
        raise SystemExit("some requests did not land in Redis")
    if args.json:
        emit("django", [
            Figure("django.bare", "Django bare view", best["bare"], "us/req", "lower"),
            Figure("django.overhead", "Django slicecount overhead", over["slicecount"],
                   "us/req", "lower"),
            Figure("django.prometheus_overhead", "django-prometheus overhead",
                   over["django-prometheus"], "us/req", "lower"),
            Figure("django.ratio", "slicecount / django-prometheus overhead", ratio, "x",
                   "lower"),
        ])  # fmt: skip


if __name__ == "__main__":
    main()
