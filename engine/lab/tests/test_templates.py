"""The operator's command templates: split like a shell, filled per argument, never run by
a shell; a power command's failing line does not stop the next (no host needed)."""

from pathlib import Path

import pytest

from engine.lab.runner import LabHost, expand, power_cycle
from engine.lab.ssh import Endpoint


def _host(power: str = "true", console: str = "true", address: str = "10.0.0.7") -> LabHost:
    endpoint = Endpoint(address, 2222, "root", Path("/k"), "ssh-ed25519 AAAA")
    return LabHost("p9-1", endpoint, console, power, boot_timeout=60.0)


def test_templates_are_split_and_filled_per_argument_without_a_shell():
    power = """
    # the BMC of {name}
    ipmitool -I lanplus -H {name}-bmc.lab -U admin -f /etc/rcubench/ipmi -- chassis power cycle
    ssh -p {port} -- {address} 'true; echo $(id)'
    awk '{print}' /dev/null
    """
    assert expand(power, _host(power)) == [
        ["ipmitool", "-I", "lanplus", "-H", "p9-1-bmc.lab", "-U", "admin", "-f",
         "/etc/rcubench/ipmi", "--", "chassis", "power", "cycle"],
        ["ssh", "-p", "2222", "--", "10.0.0.7", "true; echo $(id)"],  # one argument, inert
        ["awk", "{print}", "/dev/null"],  # only {name}, {address}, {port} are placeholders
    ]  # fmt: skip


@pytest.mark.parametrize(
    "address", ["-oProxyCommand=touch /tmp/rcubench-pwned", "host -oX", "host\tx", ""]
)
def test_a_host_field_that_would_be_an_option_never_reaches_an_argv(tmp_path, address):
    """The model refuses these (webapp/lab/tests/test_host_fields.py); a row that bypassed
    it is refused by the runner before any command runs."""
    mark = tmp_path / "ran"
    host = _host(power=f"touch {mark}\nssh -tt {{address}} cat /dev/ttyS0", address=address)
    with pytest.raises(ValueError, match=r"lab host address .* is refused"):
        expand(host.power_command, host)
    notes = power_cycle(host)
    assert len(notes) == 1
    assert "lab host address" in notes[0]
    assert not mark.exists()  # not even the lines before it ran


def test_a_failing_power_line_is_reported_and_the_next_still_runs(tmp_path):
    mark = tmp_path / "started"
    notes = power_cycle(_host(f"false\nsh -c 'exit 3'\ntouch {mark}\n/nonexistent/ipmitool"))
    assert mark.exists()
    assert notes[0] == "false exited 1: "
    assert notes[1].startswith("sh -c 'exit 3' exited 3")
    assert notes[2].startswith("/nonexistent/ipmitool: ")
    assert len(notes) == 3
