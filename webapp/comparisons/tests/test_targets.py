"""Targets derived from a base and a topology for sweeps (webapp/comparisons/targets.py):
made once under a deterministic name, run on the base's queue, refused with the reason when
the host or the arch cannot run the shape, and hidden from the form's and the API's lists."""

import threading
import time

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import ProtectedError
from django.utils import timezone
from rest_framework.test import APIClient

from engine.vm.topology import Topology, parse_topology
from tests.support.factories import TreeFactory, UserFactory
from webapp.comparisons.forms import SubmitForm
from webapp.comparisons.models import Comparison, ServedQueue, Target
from webapp.comparisons.serving import served_by, target_queues, unserved_reason
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.comparisons.targets import (
    NAME_MAX,
    TopologyRefused,
    derived_name,
    derived_target,
    topology_of,
)

pytestmark = pytest.mark.django_db


def _mine() -> int:
    """Targets made here (the migration's qemu-* defaults are in the database too)."""
    return Target.objects.exclude(name__startswith="qemu-").count()


def _x86(name: str = "x86-smt", **change: object) -> Target:
    fields: dict[str, object] = {
        "kind": Target.Kind.QEMU, "arch": "x86_64", "machine": "pc", "sockets": 1, "cores": 2,
        "threads": 2, "memory_mb": 1024,
    }  # fmt: skip
    fields.update(change)
    return Target.objects.create(name=name, **fields)


def _ppc(name: str = "ppc-smt8") -> Target:
    return Target.objects.create(
        name=name, kind=Target.Kind.QEMU, arch="ppc64le", machine="pseries", sockets=1,
        cores=1, threads=8, memory_mb=1024,
    )  # fmt: skip


# --- deriving ------------------------------------------------------------------------------


def test_a_derived_target_is_its_base_with_the_topology_and_the_memory_rule():
    base = _x86()
    target = derived_target(base, Topology(1, 4, 2))
    assert target.name == "x86-smt--1x4x2"
    assert target.base == base
    assert (target.kind, target.arch, target.machine) == ("qemu", "x86_64", "pc")
    assert (target.sockets, target.cores, target.threads, target.cpus) == (1, 4, 2, 8)
    assert target.memory_mb == 1024 + 4 * 32
    assert target.enabled
    assert target.active
    assert target.description.startswith("Generated from x86-smt with 1x4x2")
    assert target.queue == base.queue == "bench.x86-smt"
    assert Target.objects.get(name="x86-smt--1x4x2").queue == "bench.x86-smt"  # from the row


def test_deriving_again_returns_the_same_row():
    base = _x86()
    first = derived_target(base, Topology(1, 1, 2))
    again = derived_target(Target.objects.get(pk=base.pk), Topology(1, 1, 2))
    assert again.pk == first.pk
    assert _mine() == 2
    assert first.memory_mb == 1024  # fewer vCPUs than the base: the base's memory


def test_the_base_topology_is_the_base_itself():
    base = _x86()
    assert derived_target(base, Topology(1, 2, 2)) == base
    assert _mine() == 1


def test_acceptance_shapes_x86_smt2_at_2_4_8_and_ppc64le_1_and_2_cores_smt8():
    x86, ppc = _x86(), _ppc()
    shapes = {n: derived_target(x86, parse_topology(n, topology_of(x86))) for n in "248"}
    assert {n: t.name for n, t in shapes.items()} == {
        "2": "x86-smt--1x1x2", "4": "x86-smt", "8": "x86-smt--1x4x2",
    }  # fmt: skip
    assert {t.threads for t in shapes.values()} == {2}
    one, two = (derived_target(ppc, parse_topology(s, topology_of(ppc))) for s in ("1x1x8", "16"))
    assert one == ppc
    assert (two.name, two.cores, two.threads, two.memory_mb) == ("ppc-smt8--1x2x8", 2, 8, 1280)
    assert {t.queue for t in (one, two)} == {"bench.ppc-smt8"}


def test_a_derived_target_follows_its_edited_base():
    base = _x86()
    derived_target(base, Topology(1, 4, 2))
    Target.objects.filter(pk=base.pk).update(memory_mb=2048, machine="q35")
    target = derived_target(Target.objects.get(pk=base.pk), Topology(1, 4, 2))
    assert (target.memory_mb, target.machine) == (2048 + 4 * 32, "q35")
    assert Target.objects.get(pk=target.pk).memory_mb == 2048 + 4 * 32


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topology", "reason"),
    [
        (Topology(1, 8, 2), "1x8x2 on x86-smt: 1x8x2 is 16 vCPUs, more than this host "
                            "allows (8, RCUBENCH_MAX_VCPUS)"),
        (Topology(1, 2, 4), "1x2x4 on x86-smt: x86_64 has at most 2 threads per core (SMT2), "
                            "got 4"),
        (Topology(1, 0, 2), "1x0x2 on x86-smt: cores must be at least 1, got 0"),
    ],
)  # fmt: skip
def test_a_shape_the_host_or_arch_cannot_run_is_refused_with_the_reason(settings, topology, reason):
    settings.RCUBENCH_MAX_VCPUS = 8
    base = _x86()
    with pytest.raises(TopologyRefused) as refused:
        derived_target(base, topology)
    assert refused.value.message == str(refused.value) == reason
    assert isinstance(refused.value, ValueError)
    assert _mine() == 1


def test_ppc64le_pseries_takes_the_power_smt_modes_only():
    base = _ppc()
    with pytest.raises(TopologyRefused, match="takes 1, 2, 4 or 8 threads per core"):
        derived_target(base, Topology(1, 2, 3))
    assert derived_target(base, Topology(1, 2, 4)).threads == 4


def test_the_host_allowance_is_the_setting(settings):
    base = _ppc()
    settings.RCUBENCH_MAX_VCPUS = 16
    derived_target(base, Topology(1, 2, 8))
    settings.RCUBENCH_MAX_VCPUS = 12
    with pytest.raises(TopologyRefused, match=r"more than this host allows \(12,"):
        derived_target(base, Topology(1, 2, 8))


def test_a_lab_pool_is_no_base():
    lab = Target.objects.create(name="lab-power9", kind=Target.Kind.LAB, arch="ppc64le")
    with pytest.raises(TopologyRefused) as refused:
        derived_target(lab, Topology(1, 2, 8))
    assert refused.value.message == (
        "target lab-power9 is a lab pool: its machines have the topology they have, none can "
        "be derived"
    )
    assert _mine() == 1


def test_a_derived_target_is_no_base():
    derived = derived_target(_x86(), Topology(1, 4, 2))
    with pytest.raises(TopologyRefused, match=r"x86-smt--1x4x2 is itself derived \(from x86-smt\)"):
        derived_target(derived, Topology(1, 1, 2))
    assert _mine() == 2


def test_a_name_taken_by_another_target_is_refused():
    base = _x86()
    _x86("x86-smt--1x4x2", cores=4)  # made by hand, not from the base
    with pytest.raises(TopologyRefused, match="target x86-smt--1x4x2 exists and is not x86-smt"):
        derived_target(base, Topology(1, 4, 2))


def test_a_long_base_name_still_fits_and_stays_its_own():
    long_a, long_b = "a" * 60 + "-one", "a" * 60 + "-two"
    name_a, name_b = (derived_name(n, Topology(1, 4, 2)) for n in (long_a, long_b))
    assert len(name_a) == len(name_b) == NAME_MAX
    assert name_a != name_b
    assert name_a.endswith("--1x4x2")
    target = derived_target(_x86(long_a), Topology(1, 4, 2))
    target.full_clean()  # a slug of at most 64 characters


# --- what the database and the admin hold to ---------------------------------------------


def test_the_database_refuses_a_derived_lab_pool_and_a_target_its_own_base():
    base = _x86()
    with pytest.raises(IntegrityError), transaction.atomic():
        Target.objects.create(name="lab-x", kind=Target.Kind.LAB, arch="x86_64", base=base)
    with pytest.raises(IntegrityError), transaction.atomic():
        Target.objects.filter(pk=base.pk).update(base=base)


def test_the_admin_refuses_a_base_that_is_derived_lab_or_of_another_shape():
    base = _x86()
    derived = derived_target(base, Topology(1, 4, 2))
    for other_base, message in (
        (derived, "is itself derived"),
        (Target.objects.create(name="lab-x", kind=Target.Kind.LAB, arch="x86_64"), "lab pool"),
        (_ppc(), "has its base's arch, machine"),
    ):
        candidate = Target(name="by-hand", kind="qemu", arch="x86_64", machine="pc",
                           base=other_base)  # fmt: skip
        with pytest.raises(ValidationError, match=message):
            candidate.full_clean()
    base.base = _x86("x86-other")  # a base of derived targets cannot become derived
    with pytest.raises(ValidationError, match="targets are derived from x86-smt"):
        base.full_clean()


def test_a_base_with_derived_targets_is_not_deleted():
    base = _x86()
    derived_target(base, Topology(1, 4, 2))
    with pytest.raises(ProtectedError):
        base.delete()


# --- served, enabled, listed ------------------------------------------------------------


def test_a_derived_target_is_served_when_its_base_is(settings):
    settings.RCUBENCH_SERVE_POLL_SECONDS = 10
    base = _x86()
    derived = derived_target(base, Topology(1, 4, 2))
    assert unserved_reason(derived) == (
        "no worker serves target x86-smt--1x4x2 (its queue bench.x86-smt): start a worker "
        "with RCUBENCH_SERVE matching its base x86-smt"
    )
    ServedQueue.objects.create(queue=base.queue, worker="bench@host", seen_at=timezone.now())
    assert served_by(derived) == served_by(base) == ["bench@host"]
    assert unserved_reason(derived) is None
    # A worker serving x86-* consumes the base's queue only: the derived one has none.
    assert target_queues(["x86-*"]) == {"bench.x86-smt": "x86-smt"}


def _submit(target: str) -> SubmissionError:
    tree = TreeFactory.create(name="rcu")
    request = ComparisonRequest(
        tree=tree.name, base_ref="v6.12", benchmarks=("no-such-benchmark",), target=target
    )
    with pytest.raises(SubmissionError) as refused:
        submit_comparison(request)
    assert not Comparison.objects.exists()
    return refused.value


def test_a_derived_target_of_a_disabled_base_is_disabled(settings):
    settings.RCUBENCH_REQUIRE_SERVED_TARGETS = False
    base = _x86()
    derived = derived_target(base, Topology(1, 4, 2))
    assert _submit(derived.name).field == "benchmarks"  # past the target's checks
    Target.objects.filter(pk=base.pk).update(enabled=False)
    derived = Target.objects.get(pk=derived.pk)
    assert derived.enabled
    assert not derived.active
    refused = _submit(derived.name)
    assert (refused.field, refused.message) == (
        "target", "target x86-smt--1x4x2 is disabled: its base x86-smt is"
    )  # fmt: skip


def test_the_form_and_the_api_do_not_offer_derived_targets():
    base = _x86()
    derived_target(base, Topology(1, 4, 2))
    form = SubmitForm(UserFactory.create())
    offered = {name for name, _ in form.fields["target"].choices}  # type: ignore[attr-defined]
    listed = {t["name"] for t in APIClient().get("/api/v1/targets/").json()["results"]}
    for names in (offered, listed):
        assert "x86-smt" in names
        assert "x86-smt--1x4x2" not in names


# --- two at once ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_calls_at_once_make_one_row():
    """B misses A's uncommitted row, blocks on the unique name until A commits, then reads
    A's row back instead of failing."""
    base = _x86()
    made, release = threading.Event(), threading.Event()
    got: dict[str, Target | BaseException] = {}

    def call(who: str) -> None:
        try:
            if who == "a":
                with transaction.atomic():
                    got[who] = derived_target(base, Topology(1, 4, 2))
                    made.set()
                    release.wait(10)
            else:
                made.wait(10)
                got[who] = derived_target(base, Topology(1, 4, 2))
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            got[who] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=call, args=(who,)) for who in "ab"]
    for thread in threads:
        thread.start()
    made.wait(10)
    deadline, blocked = time.monotonic() + 10, 0
    with connection.cursor() as cursor:  # B waits on A's row lock, in its INSERT
        while not blocked and time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                           "'Lock' AND datname = current_database()")  # fmt: skip
            blocked = cursor.fetchone()[0]
            time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join(20)
    assert isinstance(got["a"], Target), got["a"]
    assert isinstance(got["b"], Target), got["b"]
    assert blocked, "B never waited on A's row: the race was not run"
    assert got["a"].pk == got["b"].pk
    assert Target.objects.filter(base=base).count() == 1


def test_the_admin_lists_derived_targets_with_their_base(admin_client):
    base = _x86()
    derived_target(base, Topology(1, 4, 2))
    page = admin_client.get("/admin/comparisons/target/?base__isempty=0").content.decode()
    assert "x86-smt--1x4x2" in page
    assert ">x86-smt</td>" in page  # the base column
    assert "bench.x86-smt" in page
    own = admin_client.get("/admin/comparisons/target/?base__isempty=1").content.decode()
    assert "x86-smt--1x4x2" not in own
