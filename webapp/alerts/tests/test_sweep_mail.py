"""The mail of a sweep whose B scales worse than A: to whom a regression of its kernels
would go, once each, through a real SMTP server; nothing for a sweep that scales the same,
nothing per point."""

import numpy as np
import pytest

from tests.support.factories import TreeFactory, ended_point
from webapp.alerts import delivery, services
from webapp.alerts.models import Alert, Subscription
from webapp.alerts.sweep import notify_sweep
from webapp.comparisons.submission import ComparisonRequest
from webapp.sweeps import services as sweeps
from webapp.sweeps.models import Sweep

pytestmark = pytest.mark.django_db
LIST = "rcu@vger.example.org"
PARAM = "rcutree.jiffies_till_first_fqs"


def _ended_sweep(settings, b_exponent: float) -> Sweep:
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    tree = TreeFactory.create()
    Subscription.objects.create(tree=tree, address=LIST, kinds=["regression"])
    sweep = sweeps.submit_sweep(sweeps.SweepRequest(
        pair=ComparisonRequest(tree=tree.name, base_ref="v6.12", head_ref="rcu/next",
                               benchmarks=("sync-rcu-latency",), target="qemu-x86_64",
                               min_runs=4, max_runs=8),
        axis="cmdline", parameter=PARAM, values=("1", "2", "4"), log_axis=True,
    ))  # fmt: skip
    rng = np.random.default_rng(11)
    for p in sweep.points.select_related("comparison"):
        ended_point(p.comparison, p.x**0.2, p.x**b_exponent, rng)  # type: ignore[operator]
        # A point is never mailed itself, whatever its verdict.
        assert services.notify_comparison(p.comparison_id) == []
    return sweep


def _conclude(sweep: Sweep, capture) -> list[object]:
    with capture() as sent:
        sweeps.conclude(sweep.pk)
    sweep.refresh_from_db()
    return sent


def test_a_sweep_that_scales_worse_is_mailed_once_to_the_regression_subscribers(
    settings, smtp, django_capture_on_commit_callbacks
):
    sweep = _ended_sweep(settings, 0.5)
    sent = _conclude(sweep, django_capture_on_commit_callbacks)
    assert sweep.verdict == "scales-worse"
    assert len(sent) == 1  # conclude sent the notify task, on commit
    ids = notify_sweep(sweep.pk)
    assert notify_sweep(sweep.pk) == ids  # a second call queues no second row
    (alert,) = Alert.objects.filter(sweep=sweep)
    assert (alert.recipient, alert.kind, alert.comparison_id) == (LIST, "regression", None)
    assert delivery.deliver(alert.pk) == "sent"
    (mail,) = smtp.to(LIST)
    msg = mail.message
    assert msg["Subject"].endswith(f"sync-rcu-latency scales worse against {PARAM} (log "
                                   f"scale) (sweep #{sweep.pk})")  # fmt: skip
    assert msg["X-rcubench-Sweep"] == str(sweep.pk)
    body = msg.get_content()
    assert "and B scales worse than A:" in body
    assert "scales-worse: A's exponent 0.2" in body
    assert f"/sweeps/{sweep.pk}/" in body
    for p in sweep.points.all():
        assert f"  {p.value:>12}  " in body
    assert all(len(line) <= 78 or "https://" in line for line in body.splitlines()), body


def test_a_sweep_that_scales_the_same_is_not_mailed(settings, django_capture_on_commit_callbacks):
    sweep = _ended_sweep(settings, 0.2)
    sent = _conclude(sweep, django_capture_on_commit_callbacks)
    assert sweep.verdict != "scales-worse"
    assert sent == []
    assert notify_sweep(sweep.pk) == []
    assert not Alert.objects.exists()
