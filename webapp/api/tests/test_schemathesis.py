"""Schemathesis against the committed schema on the live server: generated requests to every
GET operation (anonymous and with a token) and to comparison creation (with a token) find no
5xx, no undocumented status code or content type, and no response that violates the schema.
Bounded (a few examples per operation) to stay well under two minutes."""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from webapp.api import services
from webapp.api.tests.test_schema import SCHEMA

schemathesis_checks = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

schema = schemathesis.openapi.from_path(SCHEMA)
GETS = schema.include(method="GET")
CREATE = schema.include(method="POST", path="/api/v1/comparisons/")
BOUNDED = settings(
    max_examples=5, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip


@pytest.fixture
def live(live_server, transactional_db, world):
    """The live server, with the API's world in its database; alice's token."""
    _, token = services.create_token(world.alice, ["read", "submit"])
    return live_server.url, {"Authorization": f"Token {token}"}


@GETS.parametrize()
@BOUNDED
def test_reads_anonymous(case, live):
    base_url, _ = live
    case.call_and_validate(base_url=base_url, checks=schemathesis_checks)


@GETS.parametrize()
@BOUNDED
def test_reads_with_a_token(case, live):
    base_url, auth = live
    case.call_and_validate(base_url=base_url, headers=auth, checks=schemathesis_checks)


@CREATE.parametrize()
@settings(BOUNDED, max_examples=15)
def test_create_with_a_token(case, live):
    base_url, auth = live
    case.call_and_validate(base_url=base_url, headers=auth, checks=schemathesis_checks)
