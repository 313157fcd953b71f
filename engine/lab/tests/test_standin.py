"""The lab runner against the stand-in, a real machine to it: ssh with the host key pinned,
the kernel copied and kexec'd, the console read through the host's console command, and
the host back on its known-good kernel whatever the kernel under test did: finished (by a
restart, or by powering off), panicked, hung at boot, never finished. A host that never
comes back is reported lost."""

import time

import pytest

from benchmarks.registry import get
from benchmarks.spec import RCUSCALE_IDLE, RunContext
from engine.lab.runner import LabJob, probe, restore, run_lab
from engine.lab.ssh import Endpoint, SSHError, answers, connect
from engine.lab.tests.standin import VIRSH, powered_on, with_power

LAB_CMDLINE = "console=ttyS0 panic=-1 rcubench.end=reboot"


def _job(x86_kernel, initrd, tmp_path, cmdline: str) -> LabJob:
    return LabJob(x86_kernel.image, initrd, f"{LAB_CMDLINE} {cmdline}", tmp_path / "console.log")


def _back(host, ending: str, cycles: int) -> None:
    back = restore(host, ending, tries=1)
    assert back.returned, back.reason
    assert back.power_cycles == cycles
    assert answers(host.endpoint)


def test_the_probe_reads_the_hosts_topology_and_kexec(standin):
    found = probe(standin)
    assert found["arch"] == "x86_64"
    assert (found["cpus"], found["sockets"], found["threads"]) == (2, 1, 2)
    assert found["smt_control"] == "on"
    assert found["kexec"] is True
    assert str(found["kernel_release"]).endswith("-amd64")  # Debian's own kernel


def test_a_host_offering_another_key_than_the_pinned_one_is_refused(standin):
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    e = standin.endpoint
    with pytest.raises(SSHError, match="not the pinned one"):
        connect(Endpoint(e.address, e.port, e.user, e.key_file, other))


# smt-toggle: the host's own SMT (its 2 threads per core) off and on through smt/control.
@pytest.mark.parametrize("bench", ["boot-time", "sync-rcu-latency", "smt-toggle"])
def test_a_benchmark_runs_by_kexec_and_the_host_comes_back(
    bench, standin, x86_kernel, x86_initramfs, tmp_path
):
    b = get(bench)
    lab = run_lab(standin, _job(x86_kernel, x86_initramfs, tmp_path, b.spec.cmdline),
                  boot_timeout=60, run_timeout=120)  # fmt: skip
    out = lab.outcome
    assert out.outcome == "ok", f"{out.reason}\n{out.console[-3000:]}"
    parsed = b.parse(out.console, RunContext(out.wall_seconds, out.ready_seconds))
    assert set(parsed) == {m.name for m in b.spec.metrics}
    assert "Linux version 6.12" in out.console  # rcubench's kernel, not the host's
    # The guest init restarts at the end; rcuscale powers off, so the power switch is used.
    ending = "powered-off" if bench == "sync-rcu-latency" else "restarted"
    assert lab.ending == ending
    assert lab.phases.copy > 0
    assert lab.phases.kernel > 0
    _back(standin, ending, cycles=0 if ending == "restarted" else 1)


def test_a_kernel_that_panics_is_recorded_and_the_host_resets_itself(
    standin, x86_kernel, x86_initramfs, tmp_path
):
    job = _job(x86_kernel, x86_initramfs, tmp_path, "rdinit=/nonexistent init=/nonexistent")
    lab = run_lab(standin, job, boot_timeout=60, run_timeout=60)
    assert lab.outcome.outcome == "panic", lab.outcome.console[-2000:]
    assert lab.outcome.reason.startswith("Kernel panic - not syncing")
    assert lab.ending == "panicked"  # panic=-1 restarts it: no power cycle needed
    _back(standin, lab.ending, cycles=0)


@pytest.mark.parametrize(
    ("cmdline", "outcome"),
    [
        # init never starts (busybox sleeping in its place): hangs at boot
        ("rdinit=/bin/busybox -- sleep 100000", "boot-failed"),
        # the benchmark never ends, so the host never comes back by itself
        (RCUSCALE_IDLE, "timeout"),
    ],
)
def test_a_kernel_that_hangs_is_power_cycled_back_to_the_known_good_one(
    cmdline, outcome, standin, x86_kernel, x86_initramfs, tmp_path
):
    started = time.monotonic()
    lab = run_lab(standin, _job(x86_kernel, x86_initramfs, tmp_path, cmdline),
                  boot_timeout=20, run_timeout=5)  # fmt: skip
    assert lab.outcome.outcome == outcome, lab.outcome.reason
    assert lab.ending == "hung"
    assert time.monotonic() - started < 20 + 5 + 30
    _back(standin, "hung", cycles=1)


def test_a_host_that_never_comes_back_is_reported_lost_after_its_tries(standin):
    # A power switch that only cuts the power: the host never boots again.
    dead = with_power(standin, f"{VIRSH} destroy {{name}}", boot_timeout=10)
    recovering = []
    try:
        back = restore(dead, "hung", tries=2, on_recovering=lambda i, why: recovering.append(i))
        assert not back.returned
        assert back.power_cycles == 3  # the first, then one per try
        assert recovering == [1, 2]
        # The last `virsh destroy` found the domain off already: the operator is told.
        assert back.reason.startswith(
            "sshd did not answer within 10 s after 3 power cycles "
            "(power command: virsh -q -c qemu:///system destroy"
        )
    finally:
        powered_on(standin)
    assert restore(standin, "restarted", tries=0).returned
