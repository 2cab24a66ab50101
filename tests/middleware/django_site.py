"""A Django site made as a user makes one (``django-admin startproject``), with an app whose
routes cover what a route label must survive: ``path``, ``re_path``, nested ``include``, a
Django REST framework router, ``i18n_patterns``, an async view, a view that raises, a view of
exactly 3 ORM queries (SQLite), and a class-based view and an async view under
``slicecount.limit``; the
slicecount middleware first in ``MIDDLEWARE``, configured by a ``SLICECOUNT`` dict.

``ROUTES`` says what each request of the tests expects: its path, its route label, its status.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT = "shopsite"
"""The project's package (``shopsite.settings``, ``shopsite.wsgi``, ``shopsite.asgi``)."""

ROUTES: list[tuple[str, str, str, int]] = [
    # method, path, route label, status
    ("GET", "/users/7/", "/users/<int:id>/", 200),
    ("GET", "/api/items/blue-mug/", "/api/items/<slug:slug>/", 200),
    ("GET", "/api/v1/orders/12/", "/api/v1/orders/<int:order_id>/", 200),
    ("GET", "/articles/2024/", "/articles/(?P<year>[0-9]{4})/$", 200),
    ("GET", "/drf/items/", "/drf/items/$", 200),
    ("GET", "/drf/items/5/", "/drf/items/(?P<pk>[^/.]+)/$", 200),
    ("GET", "/en/about/", "/<language>/about/", 200),
    ("GET", "/fr/about/", "/<language>/about/", 200),
    ("GET", "/async/", "/async/", 200),
    ("GET", "/queries/", "/queries/", 200),
    ("GET", "/boom/", "/boom/", 500),
    ("GET", "/no/such/page/", "<unmatched>", 404),
    ("POST", "/users/7/", "/users/<int:id>/", 405),
]

SHOP_VIEWS = '''
import asyncio

from django.contrib.auth.models import User
from django.http import HttpResponse, JsonResponse
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from rest_framework import routers, viewsets
from rest_framework.response import Response

import slicecount


@csrf_exempt  # a POST is refused for its method (405), not by the CSRF check (403)
@require_GET
def user(request, id):
    return HttpResponse(f"user {id}")


def item(request, slug):
    return HttpResponse(f"item {slug}")


def order(request, order_id):
    return HttpResponse(f"order {order_id}")


def article(request, year):
    return HttpResponse(f"articles of {year}")


def about(request):
    return HttpResponse(f"about ({request.LANGUAGE_CODE})")


async def async_view(request):
    await asyncio.sleep(0)
    return HttpResponse("async")


def boom(request):
    raise RuntimeError("this view raises on purpose")


def queries(request):
    """Exactly 3 ORM queries, all SELECT."""
    total = User.objects.count()
    first = list(User.objects.order_by("id")[:1])
    named = User.objects.filter(username="nobody").exists()
    return JsonResponse({"users": total, "first": len(first), "named": named})


def health(request):
    return HttpResponse("ok")


@slicecount.limit("2/minute")
async def limited_async(request):
    return HttpResponse("limited, async")


class Limited(View):
    @slicecount.limit("5/minute")
    def get(self, request):
        return HttpResponse("limited")


class Items(viewsets.ViewSet):
    def list(self, request):
        return Response([{"id": 5}])

    def retrieve(self, request, pk=None):
        return Response({"id": pk})


router = routers.DefaultRouter()
router.register("items", Items, basename="item")
'''

SHOP_URLS = """
from django.urls import include, path

from shop import views

v1 = [path("orders/<int:order_id>/", views.order)]
urlpatterns = [
    path("items/<slug:slug>/", views.item),
    path("v1/", include(v1)),
]
"""

SITE_URLS = """
from django.conf.urls.i18n import i18n_patterns
from django.urls import include, path, re_path

from shop import views

urlpatterns = [
    path("users/<int:id>/", views.user),
    path("api/", include("shop.urls")),
    re_path(r"^articles/(?P<year>[0-9]{4})/$", views.article),
    path("drf/", include(views.router.urls)),
    path("async/", views.async_view),
    path("boom/", views.boom),
    path("queries/", views.queries),
    path("limited/", views.Limited.as_view()),
    path("limited-async/", views.limited_async),
    path("health", views.health),
] + i18n_patterns(path("about/", views.about))
"""

SETTINGS_TAIL = """
import os

ALLOWED_HOSTS = ["*"]
DEBUG = False
INSTALLED_APPS += ["rest_framework", "shop"]
MIDDLEWARE = [
    "slicecount.middleware.django.SliceCountMiddleware",
    *MIDDLEWARE[:2],  # SecurityMiddleware, SessionMiddleware
    "django.middleware.locale.LocaleMiddleware",
    *MIDDLEWARE[2:],
]
USE_I18N = True
LANGUAGES = [("en", "English"), ("fr", "French")]
LOGGING = {"version": 1, "disable_existing_loggers": False}
SLICECOUNT = {
    "redis_url": os.environ["SLICECOUNT_TEST_SITE_REDIS_URL"],
    "track_queries": True,
    "exclude_paths": ["/health"],
}
"""


def make_site(parent: Path) -> Path:
    """A new project under ``parent`` (``django-admin startproject``), its app and routes,
    its SQLite database migrated; returns the folder to run it from."""
    root = parent / PROJECT
    root.mkdir()
    admin = Path(sys.executable).parent / "django-admin"
    subprocess.run([str(admin), "startproject", PROJECT, str(root)], check=True)
    shop = root / "shop"
    shop.mkdir()
    (shop / "__init__.py").write_text("")
    (shop / "views.py").write_text(SHOP_VIEWS)
    (shop / "urls.py").write_text(SHOP_URLS)
    (root / PROJECT / "urls.py").write_text(SITE_URLS)
    with (root / PROJECT / "settings.py").open("a") as settings:
        settings.write(SETTINGS_TAIL)
    return root


def migrate(root: Path, env: dict[str, str]) -> None:
    """The site's SQLite database made (the auth tables the 3-query view reads)."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=root, env=env, check=True,
    )  # fmt: skip
