"""The operator's command templates: split like a shell, filled per argument, never run by
a shell; a power command's failing line does not stop the next (no host needed)."""

from pathlib import Path

from engine.lab.runner import LabHost, expand, power_cycle
from engine.lab.ssh import Endpoint


def _host(power: str = "true", console: str = "true") -> LabHost:
    endpoint = Endpoint("10.0.0.7", 2222, "root", Path("/k"), "ssh-ed25519 AAAA")
    return LabHost("p9-1", endpoint, console, power, boot_timeout=60.0)


def test_templates_are_split_and_filled_per_argument_without_a_shell():
    power = """
    # the BMC of {name}
    ipmitool -I lanplus -H {name}-bmc.lab -U admin -f /etc/rcubench/ipmi chassis power cycle
    ssh -p {port} root@{address} 'true; echo $(id)'
    """
    assert expand(power, _host(power)) == [
        ["ipmitool", "-I", "lanplus", "-H", "p9-1-bmc.lab", "-U", "admin", "-f",
         "/etc/rcubench/ipmi", "chassis", "power", "cycle"],
        ["ssh", "-p", "2222", "root@10.0.0.7", "true; echo $(id)"],  # one argument, inert
    ]  # fmt: skip


def test_a_failing_power_line_is_reported_and_the_next_still_runs(tmp_path):
    mark = tmp_path / "started"
    notes = power_cycle(_host(f"false\nsh -c 'exit 3'\ntouch {mark}\n/nonexistent/ipmitool"))
    assert mark.exists()
    assert notes[0] == "false exited 1: "
    assert notes[1].startswith("sh -c 'exit 3' exited 3")
    assert notes[2].startswith("/nonexistent/ipmitool: ")
    assert len(notes) == 3
