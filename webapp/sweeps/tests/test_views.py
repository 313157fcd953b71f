"""The sweep form (/sweeps/new/): the comparison form's fields plus the axis, refusals
beside their field in the service's words with nothing stored, and a sweep that lands on
its page."""

import pytest
from django.test import Client

from engine.build.tests.conftest import BASE_TAG, DEFAULT_TREE
from tests.support.factories import MembershipFactory, TargetFactory, TreeFactory, UserFactory
from webapp.comparisons.models import Comparison
from webapp.sweeps.models import Sweep
from webapp.trees.models import Tree

pytestmark = pytest.mark.django_db
URL = "/sweeps/new/"


@pytest.fixture
def tree() -> Tree:
    assert (DEFAULT_TREE / "HEAD").exists(), f"{DEFAULT_TREE} missing: run scripts/setup.sh"
    return TreeFactory.create(name="linux-6.12", url=str(DEFAULT_TREE), public=False)


@pytest.fixture
def client_in(client, tree, settings) -> Client:
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    TargetFactory.create(name="qemu-x86_64", sockets=1, cores=2, threads=2)
    user = UserFactory.create(username="ada")
    MembershipFactory.create(tree=tree, user=user)
    client.force_login(user)
    return client


def _fields(tree: Tree, **change: object) -> dict[str, object]:
    data: dict[str, object] = {
        "tree": tree.name, "base_ref": BASE_TAG, "head_ref": "", "message_id": "",
        "benchmarks": ["smt-toggle"], "target": "qemu-x86_64", "min_runs": 4,
        "max_runs": 8, "threshold_pct": 5.0, "cmdline_a": "",
        "cmdline_b": "rcupdate.rcu_expedited=1", "visibility": "", "axis": "topology",
        "values": "2, 4, 8", "parameter": "",
    }  # fmt: skip
    data.update(change)
    return data


def test_the_form_needs_a_login_and_offers_the_axis(client, client_in):
    assert Client().get(URL).status_code == 302
    page = client_in.get(URL).content.decode()
    for field in ("axis", "values", "parameter", "base_ref", "cmdline_b"):
        assert f'id="field-{field}"' in page
    assert "Submit a sweep" in page


def test_a_topology_sweep_lands_on_its_page_with_a_point_per_value(client_in, tree):
    response = client_in.post(URL, _fields(tree))
    sweep = Sweep.objects.get()
    assert response["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.values == ["2", "4", "8"]
    cpus = [p.comparison.target.cpus for p in sweep.points.select_related("comparison__target")]
    assert cpus == [2, 4, 8]
    assert {c.cmdline_b for c in Comparison.objects.all()} == {"rcupdate.rcu_expedited=1"}


def test_a_variant_sweep_lands_on_a_page_naming_each_points_variant(client_in, tree):
    change = {"axis": "variant", "parameter": "rcuscale.nwriters", "values": "1, 2, 4",
              "benchmarks": ["sync-rcu-latency"]}  # fmt: skip
    response = client_in.post(URL, _fields(tree, **change))
    sweep = Sweep.objects.get()
    assert response["Location"] == f"/sweeps/{sweep.pk}/"
    page = client_in.get(response["Location"]).content.decode()
    assert "sync-rcu-latency's parameter <code>rcuscale.nwriters</code>" in page
    for name in ("sync-rcu-latency--nwriters-2", "sync-rcu-latency--nwriters-4"):
        assert f"({name})" in page


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"values": "2, 2"}, "values", "a value is given twice"),
        ({"values": "2, 3"}, "values", "3: 3 vCPUs do not divide"),
        (
            {"values": "4, 32"},
            "values",
            "32: 1x16x2 on qemu-x86_64: 1x16x2 is 32 vCPUs, more than this host allows",
        ),
        ({"axis": "cmdline", "parameter": "init", "values": "1, 2"}, "cmdline_a", "side A"),
        (
            {"axis": "variant", "parameter": "rcuscale.nwriters", "values": "1, 2"},
            "parameter",
            "smt-toggle does not sweep",
        ),
    ],
)
def test_each_refusal_is_beside_its_field_and_stores_nothing(client_in, tree, change, field,
                                                             message):  # fmt: skip
    response = client_in.post(URL, _fields(tree, **change))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert errors[field][0].startswith(message)
    assert not Sweep.objects.exists()
    assert not Comparison.objects.exists()
