"""./manage.py bisect: starts (or joins) a bisection as the operator, prints its id and page;
refuses with the service's reason (exit 1, on stderr); --follow prints each step as it is
answered and the outcome."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from tests.support.factories import bisectable_comparison
from webapp.bisections import summary
from webapp.bisections.management.commands import bisect
from webapp.bisections.models import Bisection, Step
from webapp.celery import app
from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("bisect", *args, stdout=out)
    return out.getvalue()


def test_it_starts_a_bisection_and_prints_its_id_and_page():
    c = bisectable_comparison()
    out = _run(str(c.pk))
    b = Bisection.objects.get()
    assert (b.mode, b.trigger, b.requested_by, b.comparison_id, b.n) == ("bisect", "cli", None,
                                                                         c.pk, 3)  # fmt: skip
    lines = out.splitlines()
    assert lines[0] == f"bisection {b.pk} started: {summary.url(b)}"
    assert summary.url(b).endswith(f"/bisections/{b.pk}/")
    assert lines[1] == (
        f"Bisection of comparison {c.pk}, sync-rcu-latency writer_duration (p50) "
        "+10.00% [+8.00, +12.00] (regression): 3 patches, at most 3 steps"
    )
    again = _run(str(c.pk), "--statistic", "sync-rcu-latency/writer_duration/p50")
    assert again.startswith(f"bisection {b.pk} was already running: this request joined it")
    _run(str(c.pk), "--attribute")
    assert Bisection.objects.filter(mode="attribute", trigger="cli").count() == 1


def test_it_refuses_with_the_reason_and_exit_status_1():
    c = bisectable_comparison()
    Comparison.objects.filter(pk=c.pk).update(state="running", result="")
    # A CommandError: manage.py prints its message on stderr and exits with its returncode.
    with pytest.raises(CommandError, match=f"comparison #{c.pk} has not ended ok") as refused:
        _run(str(c.pk))
    assert refused.value.returncode == 1
    with pytest.raises(CommandError, match="no comparison #999999"):
        _run("999999")
    with pytest.raises(CommandError, match="--statistic: give BENCH/METRIC/STAT"):
        _run(str(c.pk), "--statistic", "sync-rcu-latency/writer_duration")
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok")
    c.revision_b.series = None  # a push range: its commits come from the tree's mirror
    c.revision_b.save()
    with pytest.raises(CommandError, match="history cannot be read on this host"):
        _run(str(c.pk), "--attribute")
    assert not Bisection.objects.exists()


def test_follow_prints_each_step_as_it_is_answered_and_the_outcome(monkeypatch):
    c = bisectable_comparison()
    monkeypatch.setattr(app.control, "ping", lambda timeout: [{"worker": {"ok": "pong"}}])
    polls = []

    def the_worker_meanwhile(seconds: float) -> None:
        """What the state machine would have stored between two polls."""
        polls.append(seconds)
        b = Bisection.objects.get()
        if len(polls) == 1:
            Bisection.objects.filter(pk=b.pk).update(state="bisecting")
            Step.objects.create(
                bisection=b,
                kind="bisect",
                position=2,
                answer="like-b",
                shift=9.5,
                ci_low=8.0,
                ci_high=11.0,
                answered_at=timezone.now(),
                reason="comparison #7: CI [+8, +11] past half the effect",
            )
        else:
            Step.objects.create(
                bisection=b,
                kind="bisect",
                position=1,
                answer="like-a",
                shift=0.5,
                ci_low=-1.0,
                ci_high=2.0,
                reason="comparison #8: CI [-1, +2] short of half the effect",
            )
            Bisection.objects.filter(pk=b.pk).update(
                state="done", result="ok", outcome="unconfirmed", first=2, last=2,
                summary='patch 2/3 ("rcu: step 2"): not confirmed: the re-run was unknown.',
            )  # fmt: skip

    monkeypatch.setattr(bisect, "wait", the_worker_meanwhile)
    out = _run(str(c.pk), "--follow").splitlines()
    assert out[2:] == [
        "queued",
        "bisecting",
        'bisect patch 2/3 ("rcu: step 2"): like B, +9.50% [+8.00, +11.00] '
        "(comparison #7: CI [+8, +11] past half the effect)",
        'bisect patch 1/3 ("rcu: step 1"): like A, +0.50% [-1.00, +2.00] '
        "(comparison #8: CI [-1, +2] short of half the effect)",
        "done",
        'Culprit not confirmed: patch 2/3 ("rcu: step 2"): not confirmed: the re-run was unknown.',
    ]
    assert polls == [bisect.POLL_SECONDS, bisect.POLL_SECONDS]


def test_follow_of_a_cancelled_bisection_exits_1(monkeypatch):
    c = bisectable_comparison()
    monkeypatch.setattr(app.control, "ping", lambda timeout: [{"worker": {"ok": "pong"}}])

    def cancelled(seconds: float) -> None:
        Bisection.objects.update(state="done", result="incomplete", error_code="cancelled",
                                 error_message="cancelled by carol")  # fmt: skip

    monkeypatch.setattr(bisect, "wait", cancelled)
    with pytest.raises(CommandError, match="incomplete: cancelled: cancelled by carol"):
        _run(str(c.pk), "--follow")
