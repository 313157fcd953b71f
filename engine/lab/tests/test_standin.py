"""The lab runner against the stand-in, a real machine to it: ssh with the host key pinned,
the kernel copied and kexec'd, the console read through the host's console command, and
the host back on its known-good kernel whatever the kernel under test did: finished (by a
restart, or by powering off), panicked, hung at boot, never finished, or said it restarted
and kept running (power-cycled all the same, on a pool that takes untrusted kernels). No
run finds an earlier run's kernel on the host. A host that never comes back is reported
lost."""

import hashlib
import time
from pathlib import Path

import pytest

from benchmarks.registry import get
from benchmarks.spec import RCUSCALE_IDLE, RunContext
from engine.lab.runner import LEGACY_DIR, STAGE_DIR, LabJob, probe, restore, run_lab
from engine.lab.ssh import Endpoint, SSHError, answers, check, connect
from engine.lab.tests.standin import VIRSH, powered_on, untrusted, with_power

LAB_CMDLINE = "console=ttyS0 panic=-1 rcubench.end=reboot"
# A kernel that says it restarts and keeps running: init prints the kernel's restart line,
# then sleeps (the quotes make the script one argument of init, as the kernel parses them).
LIAR = 'rdinit=/bin/busybox -- sh -c "echo reboot: Restarting system; exec sleep 100000"'


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


def test_a_kernel_that_says_it_restarts_and_keeps_running_is_still_power_cycled(
    standin, x86_kernel, x86_initramfs, tmp_path
):
    host = untrusted(standin)  # re-imaged and power-cycled after every run
    lab = run_lab(host, _job(x86_kernel, x86_initramfs, tmp_path, LIAR), boot_timeout=60,
                  run_timeout=60)  # fmt: skip
    assert lab.ending == "restarted", lab.outcome.console[-2000:]
    assert "reboot: Restarting system" in lab.outcome.console
    assert lab.boot_id
    recovering: list[str] = []
    started = time.monotonic()
    back = restore(host, lab.ending, tries=1, boot_id=lab.boot_id,
                   on_recovering=lambda i, why: recovering.append(why))  # fmt: skip
    assert back.returned, back.reason
    # At once, not after waiting out the boot timeout for a restart that never came.
    assert (back.power_cycles, recovering) == (1, [])
    assert time.monotonic() - started < host.boot_timeout
    # The next run finds the host in a new boot.
    nxt = run_lab(host, _job(x86_kernel, x86_initramfs, tmp_path / "next",
                             get("boot-time").spec.cmdline), boot_timeout=60,
                  run_timeout=120)  # fmt: skip
    assert nxt.outcome.outcome == "ok", nxt.outcome.reason
    assert nxt.boot_id
    assert nxt.boot_id != lab.boot_id
    assert restore(host, nxt.ending, tries=1, boot_id=nxt.boot_id).returned


def _copies(host, files: list[Path]) -> list[str]:
    """Every file on the host's filesystems (its disk and its tmpfs mounts) whose content is
    one of `files`, and anything in the staging and legacy directories, found as root: more
    than any kernel of a run could read."""
    client = connect(host.endpoint)
    try:
        found = []
        for local in files:
            digest = hashlib.sha256(local.read_bytes()).hexdigest()
            script = (f"find / /run /tmp /dev/shm -xdev -type f -size {local.stat().st_size}c "
                      "-exec sha256sum {} + 2>/dev/null; true")  # fmt: skip
            out = check(client, ["sh", "-c", script], 120)
            found += [line.split(None, 1)[1] for line in out.splitlines()
                      if line.startswith(digest)]  # fmt: skip
        script = f"find {STAGE_DIR} {LEGACY_DIR} -mindepth 1 2>/dev/null; true"
        found += check(client, ["sh", "-c", script], 30).split()
    finally:
        client.close()
    return found


def test_a_run_cannot_find_an_earlier_runs_kernel_on_the_host(
    standin, x86_kernel, x86_initramfs, tmp_path
):
    """The first run's kernel and initramfs are nowhere on the host when the next run's
    kernel could look: staged on a tmpfs, deleted after kexec -l, and (trusted-only pool:
    no re-image) never written to the host's disk."""
    files = [Path(x86_kernel.image), x86_initramfs]
    first = run_lab(standin, _job(x86_kernel, x86_initramfs, tmp_path,
                                  get("boot-time").spec.cmdline), boot_timeout=60,
                    run_timeout=120)  # fmt: skip
    assert first.outcome.outcome == "ok", first.outcome.reason
    assert restore(standin, first.ending, tries=1, boot_id=first.boot_id).returned
    seen: list[list[str]] = []

    def look(_: str) -> None:  # the next run, at its start: what its kernel could find
        seen.append(_copies(standin, files))

    second = run_lab(standin, _job(x86_kernel, x86_initramfs, tmp_path / "second",
                                   get("boot-time").spec.cmdline), boot_timeout=60,
                     run_timeout=120, on_boot_id=look)  # fmt: skip
    assert second.outcome.outcome == "ok", second.outcome.reason
    assert seen == [[]]
    assert restore(standin, second.ending, tries=1, boot_id=second.boot_id).returned
    assert _copies(standin, files) == []
