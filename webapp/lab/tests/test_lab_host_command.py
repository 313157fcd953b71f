"""./manage.py lab_host: what Ansible or an operator runs to register a lab host, against
the stand-in (its probe is real ssh), and the errors that name what is wrong."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.factories import TargetFactory
from webapp.comparisons.models import Target
from webapp.lab.models import LabHost

pytestmark = pytest.mark.django_db


def _args(standin, pool: str = "lab-new") -> list[str]:
    e = standin.endpoint
    return [pool, standin.name, "--arch", "x86_64", "--address", e.address, "--port",
            str(e.port), "--key-file", str(e.key_file), "--host-key", e.host_key,
            "--console-command", standin.console_command, "--power-command",
            standin.power_command, "--hardware-class", "standin"]  # fmt: skip


def test_a_host_is_added_probed_and_updated_idempotently(standin):
    out = io.StringIO()
    call_command("lab_host", *_args(standin), stdout=out)
    text = out.getvalue()
    assert "added lab pool lab-new (x86_64)" in text
    assert f"added lab host {standin.name} in lab-new" in text
    assert f"{standin.name}: x86_64, 2 CPUs (1 x 1 x 2), SMT on" in text
    host = LabHost.objects.get(name=standin.name)
    assert (host.target.kind, host.threads, host.hardware_class) == ("lab", 2, "standin")
    again = io.StringIO()
    call_command("lab_host", *_args(standin), "--boot-timeout-seconds", "90", "--no-probe",
                 stdout=again)  # fmt: skip
    assert again.getvalue().strip() == f"updated lab host {standin.name} in lab-new"
    assert LabHost.objects.get(name=standin.name).boot_timeout_seconds == 90
    assert LabHost.objects.count() == 1


def test_errors_name_the_problem():
    TargetFactory.create()  # qemu-x86_64
    base = ["--address", "h", "--key-file", "/k", "--console-command", "c",
            "--power-command", "p", "--no-probe"]  # fmt: skip
    with pytest.raises(CommandError, match="no target named 'lab-x' \\(give --arch"):
        call_command("lab_host", "lab-x", "h1", *base, "--host-key", "ssh-ed25519 AAAA")
    with pytest.raises(CommandError, match="target qemu-x86_64 is a qemu target, not a lab"):
        call_command("lab_host", "qemu-x86_64", "h1", *base, "--host-key", "ssh-ed25519 AAAA")
    with pytest.raises(CommandError, match="host_key: a public key as in known_hosts"):
        call_command("lab_host", "lab-x", "h1", "--arch", "x86_64", *base, "--host-key",
                     "[h]:22 ssh-ed25519 AAAA")  # fmt: skip
    assert not LabHost.objects.exists()
    assert not Target.objects.filter(name="lab-x").exists()  # not half-stored
