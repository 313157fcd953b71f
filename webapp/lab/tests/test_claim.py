"""Which host a lab run gets: one run per host, a comparison's runs on one hardware class,
hosts of silent workers taken over, disabled hosts never (real PostgreSQL, no host needed)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.factories import ComparisonFactory, RunFactory, TargetFactory
from webapp.comparisons.models import Target
from webapp.lab import services
from webapp.lab.models import LabHost
from webapp.lab.pools import unserved_reason
from webapp.lab.services import NoHost, claim, lab_cmdline, release

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(settings) -> Target:
    settings.RCUBENCH_LAB_HOST_WAIT_SECONDS = 0
    settings.RCUBENCH_RUN_STALE_SECONDS = 60
    return TargetFactory.create(name="lab-x86", kind="lab")


def _host(pool: Target, name: str, klass: str = "", **kw: object) -> LabHost:
    return LabHost.objects.create(
        target=pool, name=name, address="127.0.0.1", key_file="/nonexistent", host_key="x",
        hardware_class=klass, console_command="true", power_command="true", **kw,
    )  # fmt: skip


def _never() -> None:
    raise AssertionError("no wait expected")


def test_one_run_per_host_and_the_next_run_waits_for_a_free_one(pool):
    host = _host(pool, "h1")
    c = ComparisonFactory.create(target=pool)
    first, second = RunFactory.create(comparison=c), RunFactory.create(comparison=c)
    got, abandoned = claim(first, pool, _never)
    assert (got.pk, abandoned) == (host.pk, False)
    host.refresh_from_db()
    assert (host.state, host.run_id) == ("busy", first.pk)
    with pytest.raises(NoHost, match="was free within 0 s"):
        claim(second, pool, lambda: None)
    release(got)
    assert claim(second, pool, _never)[0].pk == host.pk


def test_a_comparisons_runs_keep_to_the_class_of_its_first_run(pool):
    power9 = [_host(pool, f"p9-{i}", "power9-2s") for i in range(2)]
    other = _host(pool, "odd-one")
    other.state_changed_at = timezone.now() - timedelta(days=1)  # idle longest: picked first
    other.save()
    c = ComparisonFactory.create(target=pool)
    runs = [RunFactory.create(comparison=c) for _ in range(3)]
    assert claim(runs[0], pool, _never)[0].name == "odd-one"  # a class of its own
    release(other)
    # The odd host is free, so the next runs take it, never a power9 one.
    assert claim(runs[1], pool, _never)[0].name == "odd-one"
    with pytest.raises(NoHost):
        claim(runs[2], pool, lambda: None)
    # Another comparison may start on a power9 host, then uses either of the class.
    d = ComparisonFactory.create(target=pool)
    d_runs = [RunFactory.create(comparison=d) for _ in range(2)]
    names = {claim(r, pool, _never)[0].name for r in d_runs}
    assert names == {h.name for h in power9}


def test_disabled_hosts_take_no_runs_and_submission_is_told(pool):
    host = _host(pool, "h1")
    assert unserved_reason(pool) is None
    services.disable(host, "did not come back")
    assert unserved_reason(pool) == "every host of lab pool lab-x86 is disabled"
    run = RunFactory.create(comparison=ComparisonFactory.create(target=pool))
    with pytest.raises(NoHost, match="no enabled host in lab pool lab-x86"):
        claim(run, pool, _never)
    empty = TargetFactory.create(name="lab-empty", kind="lab")
    assert unserved_reason(empty) == "lab pool lab-empty has no hosts"
    assert unserved_reason(TargetFactory.create()) is None  # a qemu target: not the lab's call


def test_a_host_disabled_by_an_operator_mid_run_stays_disabled(pool):
    host = _host(pool, "h1")
    run = RunFactory.create(comparison=ComparisonFactory.create(target=pool))
    got, _ = claim(run, pool, _never)
    services.disable(host, "disabled by ops")
    release(got)  # the run ends afterwards
    host.refresh_from_db()
    assert (host.state, host.state_reason) == ("disabled", "disabled by ops")


def test_a_host_whose_worker_went_silent_is_taken_over_for_a_power_cycle(pool):
    host = _host(pool, "h1")
    lost = RunFactory.create(comparison=ComparisonFactory.create(target=pool))
    claim(lost, pool, _never)
    run = RunFactory.create(comparison=ComparisonFactory.create(target=pool))
    with pytest.raises(NoHost):  # busy, heartbeat fresh
        claim(run, pool, lambda: None)
    LabHost.objects.filter(pk=host.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    got, abandoned = claim(run, pool, _never)
    assert (got.pk, abandoned, got.run_id) == (host.pk, True, run.pk)
    assert "taken over from a silent worker (was busy)" in got.state_reason


def test_the_command_line_on_a_host_restarts_at_the_end_and_on_panic(pool):
    host = _host(pool, "h1", console_device="hvc0")
    line = lab_cmdline(host, "rcubench.bench=boot-time")
    assert line == "console=hvc0 panic=-1 rcubench.end=reboot rcubench.bench=boot-time"


def test_a_host_key_must_be_one_public_key(pool):
    from django.core.exceptions import ValidationError

    host = _host(pool, "h1")
    host.host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9"
    host.full_clean()
    bad_keys = ("ssh-ed25519", "ssh-ed25519 AAAA\nssh-rsa BBBB", "ssh-ed25519 AAAA\n",
                "ssh-dss AAAA", "AAAA= x")  # fmt: skip
    for bad in bad_keys:
        host.host_key = bad
        with pytest.raises(ValidationError, match="as in known_hosts"):
            host.full_clean()
