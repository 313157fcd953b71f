"""./manage.py sweep --cancel: the operator cancels any sweep's unfinished points, through
the same service as the page and the API, and the same one "sweep state" line."""

import logging

import numpy as np
import pytest
from django.core.management import call_command

from tests.support.factories import TreeFactory, ended_point
from webapp.comparisons.models import Comparison
from webapp.sweeps.models import Sweep
from webapp.sweeps.tests.test_services import _sweep, cancelling

pytestmark = pytest.mark.django_db


@pytest.fixture
def few_runs(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True


def test_cancel_from_the_command_line_ends_the_unfinished_points_and_logs_once(
    few_runs, caplog, capsys
):
    sweep = _sweep()
    first, *rest = sweep.points.select_related("comparison")
    ended_point(first.comparison, 1.0, 1.0, np.random.default_rng(1))
    caplog.set_level(logging.INFO)
    call_command("sweep", cancel=sweep.pk)
    assert cancelling(caplog) == [{"sweep": sweep.pk, "by": "cli", "points": 2}]
    assert capsys.readouterr().out == f"sweep {sweep.pk} cancelled: 2 unfinished points ended\n"
    states = dict(Comparison.objects.values_list("pk", "error_code"))
    assert states[first.comparison_id] == ""  # an ended point is left as it ended
    assert {states[p.comparison_id] for p in rest} == {"cancelled"}
    reasons = {p.comparison.error_message for p in sweep.points.select_related("comparison")[1:]}
    assert reasons == {f"sweep #{sweep.pk} cancelled from the command line"}


def test_variant_submits_the_benchmarks_variant_at_each_value(few_runs, capsys):
    tree = TreeFactory.create()
    call_command(
        "sweep",
        tree=tree.name,
        base="v6.12",
        head="rcu/next",
        variant="rcuscale.writer_holdoff",
        values="0,500,1000",
        runs=4,
        max_runs=8,
        no_wait=True,
    )
    sweep = Sweep.objects.get()
    assert capsys.readouterr().out == f"sweep {sweep.pk} submitted: 3 points\n"
    benchmarks = [p.comparison.benchmarks for p in sweep.points.select_related("comparison")]
    assert benchmarks == [
        ["sync-rcu-latency"],  # rcuscale's default holdoff is 0
        ["sync-rcu-latency--writer-holdoff-500"],
        ["sync-rcu-latency--writer-holdoff"],
    ]  # the preset: 1000 us
    assert (sweep.axis, sweep.log_axis) == ("variant", False)  # a delay, not a count
