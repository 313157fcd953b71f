"""`./manage.py compare --server URL --token T`: the same command through the REST API of a
(live) rcubench: submit, refuse naming the option, follow, print the same verdict table as
the local command, cancel."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from engine.build.tests.conftest import FIXTURES
from tests.support.factories import (
    ComparisonFactory,
    MembershipFactory,
    MetricVerdictFactory,
    RevisionFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.api import services as api
from webapp.celery import app
from webapp.comparisons import exports
from webapp.comparisons.management.commands.compare import Command
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.comparisons.summary import report_url
from webapp.routing import ADVANCE_COMPARISON
from webapp.states import Result

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, tuple]]:
    """Tasks sent after a submission commits, recorded instead of sent (no broker)."""

    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, args)))
    return sent


@pytest.fixture
def server(live_server, settings, sent):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    locmem = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "cli"}
    settings.CACHES = {**settings.CACHES, "api": locmem}  # the throttles' counters
    tree = TreeFactory.create(name="rcu")
    user = UserFactory.create(username="alice")
    MembershipFactory.create(tree=tree, user=user)
    TargetFactory.create()
    _, token = api.create_token(user, ["read", "submit"])
    return live_server.url, token, tree, user


def _compare(url: str, token: str, *args: str) -> str:
    out = io.StringIO()
    call_command("compare", "--server", url, "--token", token, *args, stdout=out)
    return out.getvalue()


def test_submit_through_the_api(server, sent):
    url, token, _, user = server
    out = _compare(url, token, "--tree", "rcu", "--base", "v6.12", "--head", "rcu/dev",
                   "--bench", "sync-rcu-latency", "--bench", "boot-time", "--seed", "5",
                   "--cmdline-b", "rcutree.jiffies_till_first_fqs=1", "--no-wait")  # fmt: skip
    c = Comparison.objects.get()
    assert out == f"comparison {c.pk} submitted: {report_url(c)}\n"
    assert (c.trigger, c.submitted_by, c.seed) == ("api", user, 5)
    assert c.benchmarks == ["sync-rcu-latency", "boot-time"]
    assert c.cmdline_b == "rcutree.jiffies_till_first_fqs=1"
    assert sent == [(ADVANCE_COMPARISON, (c.pk,))]  # started, once committed


def test_submit_a_series(server):
    url, token, _, _ = server
    series = FIXTURES / "two-patches.mbox"
    _compare(url, token, "--tree", "rcu", "--base", "v6.12", "--series", str(series),
             "--allow-fuzz", "--no-wait")  # fmt: skip
    c = Comparison.objects.get()
    assert c.revision_b.series is not None
    assert bytes(c.revision_b.series.mbox) == series.read_bytes()
    assert c.revision_b.patch_fallback


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runs", "4"], "--runs: at least 24 runs per side are needed, got 4"),
        (["--bench", "nope"], "--bench: unknown benchmark 'nope'"),
        (["--cmdline-a", "init=/bin/sh"], "--cmdline-a: side A command line: init is set by"),
        (["--arch", "ppc64le", "--target", "qemu-x86_64"],
         "--arch: target qemu-x86_64 is x86_64, not ppc64le"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_option_as_the_local_command_does(server, args, message):
    url, token, _, _ = server
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        _compare(url, token, "--tree", "rcu", "--base", "v6.12", *args)
    assert not Comparison.objects.exists()


def test_a_bad_token_or_server_is_a_clear_error(server, closed_port):
    url, _, _, _ = server
    with pytest.raises(CommandError, match="the server refused the token"):
        _compare(url, "rcb_nope", "--base", "v6.12", "--no-wait")
    with pytest.raises(CommandError, match="cannot reach"):
        _compare(f"http://127.0.0.1:{closed_port}", "x", "--base", "v6.12", "--no-wait")


def test_follow_prints_the_local_commands_verdict_table(server):
    url, token, tree, user = server
    c = ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree), revision_b=RevisionFactory.create(tree=tree),
        state=ComparisonState.DONE, result=Result.OK, verdict="regression", submitted_by=user,
    )  # fmt: skip
    MetricVerdictFactory.create(comparison=c)
    MetricVerdictFactory.create(
        comparison=c, metric="gps", statistic="value", is_primary=False, verdict="regression",
        shift_pct=5.2, ci_low_pct=1.0, ci_high_pct=9.4, p_value=0.001, p_adjusted=0.004,
        median_a=120.0, median_b=126.24, warnings=["contended runs"],
        details={"unit": "count", "relative": True, "p_method": "exact"},
    )  # fmt: skip
    MetricVerdictFactory.create(comparison=c, metric="boschloo", statistic="boschloo")
    remote_out = _compare(url, token, "--follow", str(c.pk))
    local = io.StringIO()
    command = Command(stdout=local)
    command._summary(c)
    progress, table = remote_out.split("\n", 1)
    assert progress == f"done: regression: 0/{2 * c.min_runs} runs"
    assert table == local.getvalue()
    assert "sync-rcu-latency/writer_duration *" in table
    assert table.endswith(
        f"verdict: regression   report: http://127.0.0.1:8000/comparisons/{c.pk}/\n"
    )


def test_json_through_the_api_is_the_local_commands(server):
    url, token, tree, user = server
    c = ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree), revision_b=RevisionFactory.create(tree=tree),
        state=ComparisonState.DONE, result=Result.OK, verdict="regression", submitted_by=user,
    )  # fmt: skip
    MetricVerdictFactory.create(comparison=c, warnings=["contended runs"])
    remote_out, remote_err, local_out = io.StringIO(), io.StringIO(), io.StringIO()
    call_command("compare", "--server", url, "--token", token, "--follow", str(c.pk),
                 "--format", "json", stdout=remote_out, stderr=remote_err)  # fmt: skip
    call_command("compare", "--follow", str(c.pk), "--format", "json", stdout=local_out,
                 stderr=io.StringIO())  # fmt: skip
    assert remote_out.getvalue() == local_out.getvalue()  # byte for byte
    summary = json.loads(remote_out.getvalue())  # stdout: the JSON alone
    assert summary == exports.summary(c)
    assert summary["verdicts"][0]["warnings"] == ["contended runs"]
    assert remote_err.getvalue().startswith("done: regression")  # progress: stderr


def test_cancel_through_the_api(server):
    url, token, tree, user = server
    rev_a, rev_b = RevisionFactory.create(tree=tree), RevisionFactory.create(tree=tree)
    c = ComparisonFactory.create(revision_a=rev_a, revision_b=rev_b, submitted_by=user)
    assert _compare(url, token, "--cancel", str(c.pk)) == f"comparison {c.pk} cancelled\n"
    c.refresh_from_db()
    assert c.error_code == Comparison.Error.CANCELLED
    with pytest.raises(
        CommandError, match=f"comparison {c.pk}: the server answered 409: .*had already ended"
    ):
        _compare(url, token, "--cancel", str(c.pk))
    with pytest.raises(CommandError, match="the server answered 404"):
        _compare(url, token, "--follow", "999999")
