"""Whose kernels a lab pool runs (webapp/lab/pools.py), through the one submission service
as the form, the CLI and the API reach it: a trusted-only pool takes pushes and refs from
the tree's admins, staff and the operator's command line, never a series or an ordinary
submitter's ref, and says so on the `target` field with nothing stored. A comparison the
pool no longer takes takes no host; and a host comes back only in a new boot, else it is
not handed out (real PostgreSQL, the fake host of engine/lab/tests/fakehost.py)."""

import io
import os

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.test import Client

from engine.build.tests.conftest import FIXTURES
from engine.run.console import RunOutcome
from tests.support.factories import (
    ComparisonFactory,
    MembershipFactory,
    PatchSeriesFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.comparisons.models import Comparison, Target
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.lab import services
from webapp.lab.models import LabHost, LabPool
from webapp.trees.models import PatchSeries, Revision, Tree, TreeMembership

pytestmark = pytest.mark.django_db

TWO_PATCHES = (FIXTURES / "two-patches.mbox").read_bytes()
POOL = "lab-x86"
REFUSED = f"lab pool {POOL} runs trusted kernels only"


@pytest.fixture
def tree() -> Tree:
    return TreeFactory.create(name="rcu", public=True)


@pytest.fixture
def pool() -> Target:
    target = TargetFactory.create(name=POOL, kind=Target.Kind.LAB)
    LabHost.objects.create(target=target, name="h1", address="127.0.0.1",
                           key_file="/etc/rcubench/k", host_key="x",
                           console_command="true", power_command="true")  # fmt: skip
    return target


def _member(tree: Tree, name: str, role: str = TreeMembership.Role.SUBMITTER) -> User:
    user = UserFactory.create(username=name)
    MembershipFactory.create(tree=tree, user=user, role=role)
    return user


def _request(tree: Tree, **change: object) -> ComparisonRequest:
    fields: dict = {"tree": tree.name, "base_ref": "v6.12", "head_ref": "rcu/dev",
                    "benchmarks": ("sync-rcu-latency",), "target": POOL}  # fmt: skip
    fields.update(change)
    return ComparisonRequest(**fields)


def _stored() -> tuple[int, int, int]:
    return Comparison.objects.count(), Revision.objects.count(), PatchSeries.objects.count()


def _as(who: str, tree: Tree) -> dict:
    """The request fields that say who submits: an account of the tree, staff, or none."""
    if who == "operator":
        return {"trigger": Comparison.Trigger.CLI}
    if who == "push":
        return {"trigger": Comparison.Trigger.WEBHOOK, "requested_by": "push 1 of rcu:dev"}
    if who == "staff":
        user = UserFactory.create(username="root", is_staff=True)
    elif who == "admin":
        user = _member(tree, "carol", TreeMembership.Role.ADMIN)
    else:
        user = _member(tree, "alice")
    return {"trigger": Comparison.Trigger.API, "submitted_by": user.pk}


@pytest.mark.parametrize("who", ["operator", "push", "admin", "staff"])
def test_a_trusted_only_pool_takes_refs_from_pushes_admins_staff_and_the_operator(tree, pool, who):
    c = submit_comparison(_request(tree, **_as(who, tree)))
    assert c.target == pool


@pytest.mark.parametrize(
    ("who", "series", "why"),
    [
        ("submitter", False, "its submitter is not an admin of tree rcu"),
        ("submitter", True, "a patch series is its submitter's code"),
        ("admin", True, "a patch series is its submitter's code"),
        ("operator", True, "a patch series is its submitter's code"),
    ],
)
def test_a_trusted_only_pool_refuses_a_series_or_a_submitters_ref_on_target(
    tree, pool, who, series, why
):
    before = _stored()
    change = {"head_ref": "", "series_mbox": TWO_PATCHES} if series else {}
    with pytest.raises(SubmissionError) as refused:
        submit_comparison(_request(tree, **_as(who, tree), **change))
    assert refused.value.field == "target"
    assert refused.value.message.startswith(REFUSED)
    assert why in refused.value.message
    assert "choose a VM target, or a lab pool that reprovisions its hosts" in refused.value.message
    assert _stored() == before


def test_a_pool_that_reprovisions_its_hosts_takes_any_submitters_series(tree, pool):
    LabPool.objects.create(target=pool, trust=LabPool.Trust.REPROVISIONED,
                           reprovision_command="true")  # fmt: skip
    c = submit_comparison(_request(tree, **_as("submitter", tree), head_ref="",
                                   series_mbox=TWO_PATCHES))  # fmt: skip
    assert c.revision_b.series is not None


def test_a_vm_target_is_not_a_lab_pool_and_takes_any_submitter(tree):
    TargetFactory.create()  # qemu-x86_64
    c = submit_comparison(_request(tree, **_as("submitter", tree), target="qemu-x86_64"))
    assert c.target.name == "qemu-x86_64"


def test_the_web_form_shows_the_refusal_beside_target(tree, pool):
    client = Client()
    client.force_login(_member(tree, "alice"))
    response = client.post("/submit/", {
        "tree": tree.name, "base_ref": "v6.12", "head_ref": "rcu/dev", "message_id": "",
        "benchmarks": ["sync-rcu-latency"], "target": POOL, "min_runs": 24, "max_runs": 96,
        "threshold_pct": 2.0, "cmdline_a": "", "cmdline_b": "", "visibility": "",
    })  # fmt: skip
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == ["target"], errors
    assert errors["target"][0].startswith(REFUSED)
    assert not Comparison.objects.exists()


def test_the_command_line_names_the_target_option(tree, pool, tmp_path):
    mbox = tmp_path / "series.mbox"
    mbox.write_bytes(TWO_PATCHES)
    with pytest.raises(CommandError, match=f"--target: {REFUSED}.*a patch series"):
        call_command("compare", "--no-wait", "--tree", tree.name, "--base", "v6.12",
                     "--series", str(mbox), "--target", POOL, stdout=io.StringIO())  # fmt: skip
    assert not Comparison.objects.exists()


def test_a_pool_that_takes_untrusted_kernels_must_have_a_reprovision_command(pool):
    policy = LabPool(target=pool, trust=LabPool.Trust.REPROVISIONED, reprovision_command=" ")
    with pytest.raises(ValidationError) as caught:
        policy.full_clean()
    assert list(caught.value.message_dict) == ["reprovision_command"]
    with pytest.raises(IntegrityError), transaction.atomic():
        LabPool.objects.create(target=pool, trust=LabPool.Trust.REPROVISIONED)


def test_lab_host_sets_the_pools_trust_and_refuses_one_without_a_reprovision_command(pool):
    args = [POOL, "h2", "--address", "h2.lab", "--key-file", "/etc/rcubench/k", "--host-key",
            "ssh-ed25519 AAAAC3Nza", "--console-command", "true", "--power-command", "true",
            "--no-probe"]  # fmt: skip
    with pytest.raises(CommandError, match="reprovision_command: a pool that takes untrusted"):
        call_command("lab_host", *args, "--trust", "reprovisioned", stdout=io.StringIO())
    assert not LabPool.objects.exists()
    assert not LabHost.objects.filter(name="h2").exists()  # nothing stored
    out = io.StringIO()
    call_command("lab_host", *args, "--trust", "reprovisioned", "--reprovision-command",
                 "virsh -q -c qemu:///system destroy -- {name}", stdout=out)  # fmt: skip
    assert f"lab pool {POOL}: reprovisioned" in out.getvalue()
    assert LabPool.objects.get(target=pool).trusted_only is False


def test_a_comparison_the_pool_no_longer_takes_takes_no_host(pool, settings):
    """Queued while the pool reprovisioned its hosts; the pool is trusted-only now."""
    settings.RCUBENCH_LAB_RECOVERY_TRIES = 0  # were it claimed: ssh refused, one power cycle
    LabHost.objects.update(boot_timeout_seconds=10)
    series = RevisionFactory.create(series=PatchSeriesFactory.create())
    c = ComparisonFactory.create(target=pool, revision_b=series,
                                 revision_a__tree=series.tree)  # fmt: skip
    run = RunFactory.create(comparison=c)
    got: list[RunOutcome] = []
    services.run_on_host(run, pool, FIXTURES / "none", FIXTURES / "none", "", FIXTURES / "x",
                         on_poll=lambda: None, record=got.append)  # fmt: skip
    [out] = got
    assert out.outcome == "infra-error"
    assert out.reason.startswith(REFUSED)
    host = LabHost.objects.get()
    assert (host.state, host.run_id) == ("available", None)  # never claimed


# --- a whole run on the fake host: the boot id decides -------------------------------------


def _fake_pool(fake_host, pool: Target, **host_fields: object) -> LabHost:
    LabHost.objects.filter(target=pool).delete()
    engine = fake_host.lab_host()
    e = engine.endpoint
    return LabHost.objects.create(
        target=pool, name=fake_host.name, address=e.address, port=e.port, user=e.user,
        key_file=str(e.key_file), host_key=e.host_key, console_command=engine.console_command,
        kernel_release=os.uname().release, boot_timeout_seconds=10, **host_fields,
    )  # fmt: skip


def _run_once(pool: Target, tmp_path) -> tuple[LabHost, int, list[RunOutcome]]:
    kernel, initrd = tmp_path / "bzImage", tmp_path / "initrd"
    kernel.write_bytes(os.urandom(4096))
    initrd.write_bytes(os.urandom(1024))
    run = RunFactory.create(comparison=ComparisonFactory.create(target=pool))
    got: list[RunOutcome] = []
    services.run_on_host(run, pool, kernel, initrd, "", tmp_path / "console.log",
                         on_poll=lambda: None, record=got.append)  # fmt: skip
    return LabHost.objects.get(target=pool), run.pk, got


def _states(caplog, host: LabHost) -> list[tuple[str, object]]:
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    return [(line["state"], line.get("run")) for line in lines
            if line.get("event") == "labhost state" and line["labhost"] == host.name]  # fmt: skip


def test_a_host_whose_boot_id_did_not_change_is_disabled_naming_the_run(
    fake_host, pool, tmp_path, settings, caplog
):
    """The kernel printed its restart and kept running (the fake host keeps its boot id
    and answers ssh), and the power command does not reboot it either."""
    settings.RCUBENCH_LAB_RECOVERY_TRIES = 1
    before = fake_host.boot_id
    _fake_pool(fake_host, pool, power_command="true")
    host, run_pk, [out] = _run_once(pool, tmp_path)
    assert out.outcome == "ok"  # the run itself is recorded as it went
    assert host.state == "disabled"
    assert host.boot_id == before
    assert host.state_reason.startswith(f"the boot id {before} did not change: the host did "
                                        "not reboot")  # fmt: skip
    assert _states(caplog, host) == [("busy", run_pk), ("recovering", run_pk),
                                     ("disabled", run_pk)]  # fmt: skip
    assert [op for op, _ in fake_host.kexec_calls()] == ["load", "exec"]


def test_a_pool_that_takes_untrusted_kernels_reprovisions_and_power_cycles_every_host(
    fake_host, pool, tmp_path, caplog
):
    LabPool.objects.create(target=pool, trust=LabPool.Trust.REPROVISIONED,
                           reprovision_command=fake_host.reboot_command("reprovision"))  # fmt: skip
    before = fake_host.boot_id
    _fake_pool(fake_host, pool, power_command=fake_host.reboot_command())
    host, run_pk, [out] = _run_once(pool, tmp_path)
    assert out.outcome == "ok"
    assert fake_host.order() == ["reprovision", "power"]
    assert fake_host.boot_id != before
    assert (host.state, host.run_id) == ("available", None)
    assert _states(caplog, host) == [("busy", run_pk), ("available", None)]
