"""Property-based fuzzing of every endpoint from /openapi.json: no input yields a 5xx."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from tests.datasource.conftest import NOW

# The app object is built at import (schemathesis needs it to load the schema); its Redis URL
# is set per test through the fixture below, which swaps in the session's server.
_app = create_app(Settings(), limits=Limits(max_series=20, max_points=500), clock=lambda: NOW)
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)


@pytest.mark.slow  # fuzzing: ~7 s of make quick's minute; make test runs it
@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_input_makes_the_datasource_fail(case: Any, fuzz_client: TestClient) -> None:
    response = case.call(session=fuzz_client)
    case.validate_response(response, checks=[not_a_server_error])
