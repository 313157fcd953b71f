"""Throttling: anonymous clients by address, accounts by user, and the submit scope; a
throttled request is a 429 with Retry-After. Rates lowered here through the settings."""

import pytest

pytestmark = pytest.mark.django_db


def _rates(settings, **rates):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **rates},
    }


def test_anonymous_clients_are_throttled(world, anon, client_for, settings):
    _rates(settings, anon="3/min")
    codes = [anon.get("/api/v1/targets/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = anon.get("/api/v1/trees/")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "throttled" in response.json()["detail"]
    # An account is counted on its own (the user rate).
    assert client_for(world.bob).get("/api/v1/targets/").status_code == 200


def test_accounts_are_throttled_per_user(world, client_for, settings):
    _rates(settings, user="2/min")
    bob, alice = client_for(world.bob), client_for(world.alice)
    assert [bob.get("/api/v1/targets/").status_code for _ in range(3)] == [200, 200, 429]
    assert alice.get("/api/v1/targets/").status_code == 200


def test_submissions_have_their_own_rate(world, client_for, settings):
    _rates(settings, submit="1/hour")
    alice = client_for(world.alice)
    request = {"tree": "rcu", "base_ref": "v6.12"}
    assert alice.post("/api/v1/comparisons/", request, format="json").status_code == 201
    assert alice.post("/api/v1/comparisons/", request, format="json").status_code == 429
    assert alice.get("/api/v1/comparisons/").status_code == 200  # reads are not "submit"


def test_an_unreachable_cache_lets_requests_through(world, anon, settings, closed_port):
    settings.CACHES = {
        **settings.CACHES,
        "api": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": f"redis://127.0.0.1:{closed_port}/1",
                "OPTIONS": {"socket_connect_timeout": 0.5}},
    }  # fmt: skip
    _rates(settings, anon="1/min")
    assert [anon.get("/api/v1/targets/").status_code for _ in range(2)] == [200, 200]
