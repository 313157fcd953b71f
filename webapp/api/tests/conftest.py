"""Fixtures of the API tests: accounts with their roles, a public and a restricted
comparison with runs, measurements and verdicts, and clients authenticated each way."""

import itertools
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.support.factories import (
    ComparisonFactory,
    MeasurementFactory,
    MembershipFactory,
    MetricVerdictFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.api import services
from webapp.celery import app
from webapp.comparisons.models import Comparison, Run
from webapp.trees.models import Tree, TreeMembership

_locations = itertools.count()


@pytest.fixture(autouse=True)
def _throttle_cache(settings):
    """Each test counts requests in a fresh local-memory cache of its own (not the shared
    Redis one), so that tests neither throttle each other nor other runs of the suite;
    and cheap password hashes (every test makes five accounts)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.CACHES = {
        **settings.CACHES,
        "api": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"api-tests-{next(_locations)}",
        },
    }


@pytest.fixture(autouse=True)
def sent(monkeypatch) -> list[tuple[str, tuple]]:
    """Tasks the API sends (after a commit: live-server tests commit), recorded instead of
    sent: no broker, least of all the one a `make up` worker on this machine consumes."""

    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, args)))
    return sent


@dataclass
class World:
    tree: Tree  # public
    embargo: Tree  # not public: its comparisons are restricted
    alice: User  # submitter on both trees
    bob: User  # no role anywhere
    carol: User  # admin of both trees
    dave: User  # submitter on both trees, not alice
    staff: User
    public: Comparison  # alice's, on tree
    restricted: Comparison  # alice's, on embargo
    public_run: Run
    restricted_run: Run


def _comparison_with_data(tree: Tree, user: User, visibility: str) -> tuple[Comparison, Run]:
    rev_a = RevisionFactory.create(tree=tree, ref="v6.12")
    rev_b = RevisionFactory.create(tree=tree, ref="rcu/dev")
    c = ComparisonFactory.create(
        revision_a=rev_a, revision_b=rev_b, submitted_by=user, visibility=visibility,
        target=TargetFactory.create(), trigger=Comparison.Trigger.API,
    )  # fmt: skip
    run = None
    for order, side in enumerate(["A", "B"]):
        r = RunFactory.create(comparison=c, side=side, index=0, order=order, state="done",
                              result="ok", wall_seconds=31.5)  # fmt: skip
        MeasurementFactory.create(run=r, samples=[6.0, 6.1, 5.9])
        MeasurementFactory.create(run=r, metric="gps", unit="count", samples=[120.0])
        run = run or r
    MetricVerdictFactory.create(comparison=c)
    assert run is not None
    return c, run


@pytest.fixture
def world(db) -> World:
    tree = TreeFactory.create(name="rcu", public=True)
    embargo = TreeFactory.create(name="embargo", public=False)
    alice, bob, carol, dave = (
        UserFactory.create(username=n) for n in ("alice", "bob", "carol", "dave")
    )
    staff = UserFactory.create(username="root", is_staff=True)
    for t in (tree, embargo):
        MembershipFactory.create(tree=t, user=alice)
        MembershipFactory.create(tree=t, user=dave)
        MembershipFactory.create(tree=t, user=carol, role=TreeMembership.Role.ADMIN)
    public, public_run = _comparison_with_data(tree, alice, Comparison.Visibility.PUBLIC)
    restricted, restricted_run = _comparison_with_data(
        embargo, alice, Comparison.Visibility.RESTRICTED
    )
    return World(tree, embargo, alice, bob, carol, dave, staff, public, restricted, public_run,
                 restricted_run)  # fmt: skip


@pytest.fixture
def client_for():
    """An API client authenticated as `user` with a fresh token of `scopes` (default: read
    and submit, everything a token may do; None: anonymous)."""

    def make(
        user: User | None, scopes: tuple[str, ...] | list[str] = ("read", "submit")
    ) -> APIClient:
        client = APIClient()
        if user is not None:
            _, token = services.create_token(user, scopes)
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client

    return make


@pytest.fixture
def anon() -> APIClient:
    return APIClient()
