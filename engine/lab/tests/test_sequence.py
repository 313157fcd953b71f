"""The runner's command sequence on a host, against the fake host (engine/lab/tests/
fakehost.py: real ssh and sftp, local commands, kexec recorded): nothing of another run is
on the host when the kernel under test runs, nor in its console; and the host is handed
back only after a power cycle (a reprovision first, on a pool that takes untrusted
kernels) or a reboot that its new boot id proves."""

import hashlib
import os
import subprocess

import pytest

from engine.lab.runner import LabJob, restore, run_lab
from engine.lab.tests.fakehost import FakeHost
from engine.run.outcomes import BOOT_FAILED, INFRA, OK

RELEASE = os.uname().release  # the fake host's kernel is this machine's


@pytest.fixture
def job(tmp_path) -> LabJob:
    kernel, initrd = tmp_path / "bzImage", tmp_path / "initramfs.cpio.gz"
    kernel.write_bytes(os.urandom(64 * 1024))
    initrd.write_bytes(os.urandom(16 * 1024))
    return LabJob(kernel, initrd, "console=ttyS0 panic=-1 rcubench.end=reboot",
                  tmp_path / "run" / "console.log")  # fmt: skip


def _run(fake_host: FakeHost, job: LabJob, **change: object):
    return run_lab(fake_host.lab_host(**change), job, boot_timeout=20, run_timeout=20)


def test_a_kernel_is_staged_on_tmpfs_deleted_after_its_load_and_boots_from_an_empty_dir(
    fake_host, job
):
    # What earlier runs left: a kernel in the staging directory (a run cut before its
    # clean-up), and the six files the runner before issue 30 kept on the host's disk.
    fake_host.stage.mkdir()
    (fake_host.stage / "kernel-of-comparison-7").write_bytes(b"embargoed")
    fake_host.legacy.mkdir()
    for i in range(6):
        (fake_host.legacy / f"{i:024x}.bzImage").write_bytes(b"embargoed")
    before = fake_host.boot_id
    lab = _run(fake_host, job)
    assert (lab.outcome.outcome, lab.ending) == (OK, "restarted"), lab.outcome.reason
    assert lab.boot_id == before
    # kexec -l saw this run's two files only; kexec -e an empty directory.
    assert fake_host.kexec_calls() == [("load", ["initrd", "kernel"]), ("exec", [])]
    loaded = hashlib.sha256(fake_host.loaded.read_bytes()).hexdigest()
    assert loaded == hashlib.sha256(job.kernel.read_bytes()).hexdigest()
    assert list(fake_host.stage.iterdir()) == []
    assert not fake_host.legacy.exists()
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(fake_host.stage)], check=True,
                        capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert fs == "tmpfs"
    # The console command's replay of an earlier run is dropped before kexec -e.
    assert "RESTRICTED-BYTES" not in lab.outcome.console
    assert "Linux version 6.12.0 (rcubench)" in lab.outcome.console


def test_a_staging_directory_that_is_not_a_tmpfs_is_refused_before_anything_is_copied(
    fake_host, job, tmp_path
):
    disk = tmp_path / "on-disk"
    kind = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    if kind == "tmpfs":
        pytest.skip("the test's own directory is a tmpfs here: no disk to refuse")
    fake_host.stage = disk
    lab = _run(fake_host, job)
    assert (lab.outcome.outcome, lab.ending) == (INFRA, "not-started")
    assert f"is on {kind}, not on a tmpfs" in lab.outcome.reason
    assert list(disk.iterdir()) == []
    assert fake_host.kexec_calls() == [("unload", [])]


def test_an_image_kexec_refuses_is_deleted_and_unloaded_and_never_executed(fake_host, job):
    fake_host.refuse.touch()
    lab = _run(fake_host, job)
    assert (lab.outcome.outcome, lab.ending) == (BOOT_FAILED, "not-started")
    assert "kexec refused the kernel: kexec_file_load failed" in lab.outcome.reason
    assert fake_host.kexec_calls() == [("load", ["initrd", "kernel"]), ("unload", [])]
    assert list(fake_host.stage.iterdir()) == []


# --- restore: the power cycle decision and the boot id -----------------------------------


def test_an_untrusted_pool_reprovisions_and_power_cycles_whatever_the_console_said(fake_host):
    """The kernel printed `reboot: Restarting system` and kept running, answering ssh with
    the pinned key: on a pool that takes untrusted kernels it is reprovisioned and
    power-cycled at once, not trusted to have restarted."""
    before = fake_host.boot_id
    host = fake_host.lab_host(trusted_only=False, power_command=fake_host.reboot_command(),
                              reprovision_command=fake_host.reboot_command("reprovision"),
                              known_good_release=RELEASE)  # fmt: skip
    recovering: list[str] = []
    back = restore(host, "restarted", tries=1, boot_id=before,
                   on_recovering=lambda i, why: recovering.append(why))  # fmt: skip
    assert back.returned, back.reason
    assert (back.power_cycles, recovering) == (1, [])
    assert fake_host.order() == ["reprovision", "power"]
    assert fake_host.boot_id != before


def test_a_trusted_pool_host_whose_boot_id_did_not_change_is_power_cycled(fake_host):
    before = fake_host.boot_id
    host = fake_host.lab_host(power_command=fake_host.reboot_command())
    recovering: list[str] = []
    back = restore(host, "restarted", tries=1, boot_id=before,
                   on_recovering=lambda i, why: recovering.append(why))  # fmt: skip
    assert back.returned, back.reason
    assert back.power_cycles == 1
    assert recovering == [f"the boot id {before} did not change: the host did not reboot (a "
                          "kernel that printed its restart and kept running?)"]  # fmt: skip
    assert fake_host.order() == ["power"]  # no reprovision on a trusted-only pool


def test_a_host_that_never_reboots_is_not_handed_back(fake_host):
    before = fake_host.boot_id
    back = restore(fake_host.lab_host(power_command="true"), "restarted", tries=1,
                   boot_id=before)  # fmt: skip
    assert not back.returned
    assert back.power_cycles == 1
    assert back.reason.startswith(f"the boot id {before} did not change")
    assert back.reason.endswith("after 1 power cycles")


def test_a_host_that_rebooted_by_itself_is_back_without_a_power_cycle(fake_host):
    before = fake_host.boot_id
    fake_host.reboot()  # the kernel's restart went through the firmware
    host = fake_host.lab_host(power_command=fake_host.reboot_command(),
                              known_good_release=RELEASE)  # fmt: skip
    back = restore(host, "restarted", tries=1, boot_id=before)
    assert back.returned, back.reason
    assert back.power_cycles == 0
    assert fake_host.order() == []


def test_a_host_that_comes_back_on_another_kernel_is_not_handed_back(fake_host):
    host = fake_host.lab_host(power_command=fake_host.reboot_command(),
                              known_good_release="6.1.0-known-good")  # fmt: skip
    back = restore(host, "hung", tries=0, boot_id=fake_host.boot_id)
    assert not back.returned
    assert back.reason.startswith(f"it runs kernel {RELEASE}, not its known-good 6.1.0-known-good")


def test_a_failed_reprovision_stops_there_and_the_host_is_not_handed_back(fake_host):
    reprovision = f"false\n{fake_host.reboot_command('reprovision')}"
    host = fake_host.lab_host(trusted_only=False, reprovision_command=reprovision,
                              power_command=fake_host.reboot_command())  # fmt: skip
    back = restore(host, "powered-off", tries=1, boot_id=fake_host.boot_id)
    assert not back.returned
    assert back.reason.startswith("the reprovision command failed: false exited 1")
    assert back.power_cycles == 0
    assert fake_host.order() == []  # neither the next line nor the power command ran


def test_an_untrusted_pool_without_a_reprovision_command_is_never_handed_back(fake_host):
    host = fake_host.lab_host(trusted_only=False, power_command=fake_host.reboot_command())
    back = restore(host, "restarted", tries=0, boot_id=fake_host.boot_id)
    assert not back.returned
    assert "takes untrusted kernels but has no reprovision command" in back.reason
    assert fake_host.order() == []
