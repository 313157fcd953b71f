"""Lab host fields are filled into the operator's command templates on the lab worker:
a value that starts with `-` would be an option there (`ssh -oProxyCommand=...`), so each
field is checked where hosts are made (the admin, `manage.py lab_host`) with an error that
names the field, and nothing is stored."""

import io

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.factories import TargetFactory, UserFactory
from webapp.comparisons.models import Target
from webapp.lab.models import LabHost

pytestmark = pytest.mark.django_db

HOSTILE = "-oProxyCommand=touch /tmp/rcubench-pwned"
GOOD = {
    "name": "p9-1", "address": "p9-1.lab.example.org", "port": 22, "user": "root",
    "key_file": "/etc/rcubench/lab_runner_key", "host_key": "ssh-ed25519 AAAAC3Nza",
    "console_command": "ipmitool -I lanplus -H {name}-bmc -U admin -f /etc/rcubench/ipmi "
    "-- sol activate",
    "power_command": "ipmitool -I lanplus -H {name}-bmc -U admin -f /etc/rcubench/ipmi "
    "-- chassis power cycle",
    "console_device": "ttyS0", "boot_timeout_seconds": 600,
}  # fmt: skip


def _pool() -> Target:
    return TargetFactory.create(name="lab-p9", kind=Target.Kind.LAB)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("address", HOSTILE, "must not start with '-'"),
        ("address", "-p9-1.lab", "must not start with '-'"),
        ("address", "p9 -oProxyCommand=x", "must not hold whitespace"),
        ("address", "p9-1.lab\n", "must not hold whitespace"),
        ("address", "p9_1;lab", "is not a host name or an IP address"),
        ("address", "TCP:evil,fork", "is not a host name or an IP address"),
        ("name", "-oProxyCommand", "must not start with '-'"),
        ("user", "-oProxyCommand=x", "a login name"),
        ("user", "root x", "a login name"),
        ("key_file", "-i/etc/shadow", "must not start with '-'"),
        ("key_file", "keys/lab", "must be an absolute path"),
        ("key_file", "/etc/rcubench/../shadow", "without '..'"),
        ("console_device", "ttyS0 init=/bin/sh", "a console device"),
        ("console_command", "ipmitool -H '{name}", "line 1: No closing quotation"),
        ("power_command", 'true\nvirsh start "{name}', "line 2: No closing quotation"),
    ],
)
def test_a_hostile_or_malformed_field_is_refused_naming_it(field, value, message):
    host = LabHost(target=_pool(), **{**GOOD, field: value})
    with pytest.raises(ValidationError) as caught:
        host.full_clean()
    assert list(caught.value.message_dict) == [field]
    assert message in " ".join(caught.value.message_dict[field])


@pytest.mark.parametrize(
    "address", ["p9-1", "p9-1.lab.example.org", "10.0.0.7", "fd00::7", "localhost."]
)
def test_host_names_and_addresses_pass(address):
    LabHost(target=_pool(), **{**GOOD, "address": address}).full_clean()


def test_lab_host_command_refuses_an_option_as_address_and_stores_nothing():
    with pytest.raises(CommandError, match="address: must not start with '-'"):
        call_command(
            "lab_host", "lab-p9", "p9-1", "--arch", "ppc64le", "--address", HOSTILE,
            "--key-file", "/etc/rcubench/lab_runner_key", "--host-key", GOOD["host_key"],
            "--console-command", GOOD["console_command"],
            "--power-command", GOOD["power_command"], "--no-probe", stdout=io.StringIO(),
        )  # fmt: skip
    assert not LabHost.objects.exists()
    assert not Target.objects.filter(name="lab-p9").exists()  # the pool is not half-stored


def _admin_form(pool: Target, **fields: object) -> dict[str, object]:
    return {**GOOD, "target": pool.pk, "hardware_class": "", **fields}


def test_admin_form_refuses_an_option_as_address(client):
    pool = _pool()
    client.force_login(UserFactory.create(is_staff=True, is_superuser=True))
    page = client.post("/admin/lab/labhost/add/", _admin_form(pool, address=HOSTILE))
    assert page.status_code == 200  # the form again, with the error
    assert "must not start with &#x27;-&#x27;" in page.content.decode()
    assert not LabHost.objects.exists()
    ok = client.post("/admin/lab/labhost/add/", _admin_form(pool))
    assert ok.status_code == 302, ok.content.decode()[:2000]
    assert LabHost.objects.get().address == GOOD["address"]


def test_staff_who_are_not_superusers_cannot_change_commands(client):
    host = LabHost.objects.create(target=_pool(), **GOOD)
    staff = UserFactory.create(is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__endswith="_labhost"))
    client.force_login(staff)
    page = client.post(
        f"/admin/lab/labhost/{host.pk}/change/",
        _admin_form(host.target, power_command="sh -c 'touch /tmp/rcubench-pwned'"),
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    host.refresh_from_db()
    assert host.power_command == GOOD["power_command"]  # read-only for them: unchanged
