"""The sweep page and the sweep CLI: the points with their comparisons, the curves once
runs are stored, the verdict once the last point ends; hidden from who may not see it."""

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client

from tests.support.factories import MembershipFactory, TreeFactory, UserFactory, ended_point
from webapp.comparisons.models import Measurement
from webapp.comparisons.submission import ComparisonRequest
from webapp.sweeps import services

pytestmark = pytest.mark.django_db
PARAM = "rcutree.jiffies_till_first_fqs"


@pytest.fixture
def sweep(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    tree = TreeFactory.create()
    return services.submit_sweep(services.SweepRequest(
        pair=ComparisonRequest(tree=tree.name, base_ref="v6.12", head_ref="rcu/next",
                               benchmarks=("sync-rcu-latency",), target="qemu-x86_64",
                               min_runs=4, max_runs=8),
        axis="cmdline", parameter=PARAM, values=("1", "2", "4"), log_axis=True,
    ))  # fmt: skip


def test_a_running_sweep_lists_its_points_and_reloads(sweep):
    page = Client().get(f"/sweeps/{sweep.pk}/").content.decode()
    assert f"Sweep #{sweep.pk}: sync-rcu-latency against {PARAM} (log scale)" in page
    for p in sweep.points.all():
        assert f'href="/comparisons/{p.comparison_id}/"' in page
    assert "0 of 3 points ended" in page
    assert 'http-equiv="refresh"' in page
    assert 'id="sweep-curves"' not in page  # no runs yet


def test_a_done_sweep_shows_the_curves_and_the_verdict(sweep, capsys):
    rng = np.random.default_rng(7)
    for p in sweep.points.select_related("comparison"):
        ended_point(p.comparison, p.x**0.2, p.x**0.5, rng)
    services.conclude(sweep.pk)
    # The page shows what was judged (stored at conclusion): it reads no runs again.
    Measurement.objects.all().delete()
    page = Client().get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="sweep-curves"' in page
    assert '<span class="badge v-scales-worse">scales-worse</span>' in page
    assert "A&#x27;s exponent 0.2" in page
    assert 'http-equiv="refresh"' not in page
    call_command("sweep", follow=sweep.pk)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (f"sweep {sweep.pk}: sync-rcu-latency writer_duration p50 "
                                   f"against {PARAM} (log scale)")  # fmt: skip
    assert out.splitlines()[-1].startswith("scales-worse: A's exponent 0.2")


def test_a_restricted_sweep_is_a_404_to_outsiders_and_cancellable_by_its_admin(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    tree = TreeFactory.create(public=False)
    admin = UserFactory.create()
    MembershipFactory.create(tree=tree, user=admin, role="admin")
    sweep = services.submit_sweep(services.SweepRequest(
        pair=ComparisonRequest(tree=tree.name, base_ref="v6.12", head_ref="rcu/next",
                               benchmarks=("sync-rcu-latency",), target="qemu-x86_64",
                               min_runs=4, max_runs=8),
        axis="cmdline", parameter=PARAM, values=("1", "2"),
    ))  # fmt: skip
    assert Client().get(f"/sweeps/{sweep.pk}/").status_code == 404
    assert Client().post(f"/sweeps/{sweep.pk}/cancel").status_code == 404
    client = Client()
    client.force_login(admin)
    assert 'id="cancel"' in client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert client.post(f"/sweeps/{sweep.pk}/cancel").status_code == 302
    assert {p.comparison.error_code for p in sweep.points.select_related("comparison")} == {
        "cancelled"
    }
