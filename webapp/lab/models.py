"""Bare-metal lab hosts: the pool of a Target of kind lab and who may send kernels to it,
its hosts, and which hardware class each comparison's runs keep to. The runner itself is
engine/lab (no Django)."""

import re
import shlex

from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
    validate_ipv46_address,
)
from django.db import models
from django.db.models import Q

from webapp.comparisons.models import Comparison, Run, Target
from webapp.states import Arch

# Host fields are filled into the operator's command templates (ssh, socat, ipmitool,
# virsh): a value starting with `-` would be read as an option there
# (-oProxyCommand=...), and whitespace or a control character would make it more than one
# word. Each is refused here with the field's name (admin form, `manage.py lab_host`).
_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?\Z")  # fmt: skip


def validate_no_option(value: str) -> None:
    """No leading `-`, no whitespace or control characters."""
    if value.startswith("-"):
        raise ValidationError("must not start with '-' (it would be read as an option)")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValidationError("must not hold whitespace or control characters")


def validate_host_address(value: str) -> None:
    """A host name (RFC 1123 labels) or an IPv4/IPv6 address."""
    validate_no_option(value)
    if _HOSTNAME.match(value):
        return
    try:
        validate_ipv46_address(value)
    except ValidationError:
        raise ValidationError(
            f"{value!r:.80} is not a host name or an IP address", code="invalid"
        ) from None


def validate_key_file(value: str) -> None:
    validate_no_option(value)
    if not value.startswith("/") or "/../" in f"{value}/":
        raise ValidationError("must be an absolute path without '..'")


def validate_template(value: str) -> None:
    """Each line splits like a shell would split it (an unclosed quote is refused here, not
    on the lab worker at run time)."""
    for number, line in enumerate(value.splitlines(), 1):
        try:
            shlex.split(line)
        except ValueError as exc:
            raise ValidationError(f"line {number}: {exc}") from None


login_name_validator = RegexValidator(
    r"^[a-z_][a-z0-9_-]{0,31}\Z", "a login name: lower-case letters, digits, '_' or '-', "
    "starting with a letter or '_'",
)  # fmt: skip
console_device_validator = RegexValidator(
    r"^[A-Za-z][A-Za-z0-9_,.]{0,31}\Z", "a console device such as ttyS0 or hvc0"
)


class LabPool(models.Model):
    """Who may send kernels to a lab pool (a Target of kind lab), and how its hosts are made
    clean again. A lab Target without this row is trusted-only (webapp/lab/pools.py)."""

    class Trust(models.TextChoices):
        TRUSTED = "trusted", "Trusted kernels only (pushes; refs of tree admins and staff)"
        REPROVISIONED = "reprovisioned", "Any submitter's (hosts reprovisioned after each run)"

    target = models.OneToOneField(
        Target, on_delete=models.CASCADE, primary_key=True, related_name="lab_pool",
        limit_choices_to={"kind": Target.Kind.LAB},
    )  # fmt: skip
    trust = models.CharField(
        max_length=16, choices=Trust, default=Trust.TRUSTED,
        help_text="A kernel under test is root on the host's hardware: it can write the "
        "host's disk and firmware and read what is left there (docs/lab.md).",
    )  # fmt: skip
    reprovision_command = models.TextField(
        blank=True, validators=[validate_template],
        help_text="Commands, one per line, run on the lab worker after every run of a pool "
        "that takes untrusted kernels, before its power cycle: they must bring back the "
        "host's known-good OS from a source no kernel could write (re-image its disk, or "
        "reset its netboot image). {name}, {address} and {port} are filled in; end options "
        "with -- before them. A line that fails stops the rest, and the host is not handed "
        "out.",
    )  # fmt: skip

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(trust="trusted") | ~Q(reprovision_command=""),
                name="labpool_reprovisioned_has_command",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target.name} ({self.trust})"

    @property
    def trusted_only(self) -> bool:
        return self.trust == self.Trust.TRUSTED

    def clean(self) -> None:
        if self.target_id is not None and not self.target.is_lab:
            raise ValidationError({"target": f"{self.target} is not a lab pool"})
        if not self.trusted_only and not self.reprovision_command.strip():
            raise ValidationError({"reprovision_command": "a pool that takes untrusted "
                                   "kernels needs a reprovision command"})  # fmt: skip


class LabHost(models.Model):
    """One machine of a lab pool, reached over ssh, that boots kernels by kexec and comes
    back to its known-good kernel through its power command."""

    class State(models.TextChoices):
        AVAILABLE = "available"
        BUSY = "busy"  # one run at a time
        RECOVERING = "recovering"  # did not answer after a run: being power-cycled
        DISABLED = "disabled"  # did not come back, or an operator took it out: see reason

    target = models.ForeignKey(
        Target, on_delete=models.PROTECT, related_name="lab_hosts",
        limit_choices_to={"kind": Target.Kind.LAB}, help_text="The lab pool it serves.",
    )  # fmt: skip
    name = models.SlugField(max_length=64, unique=True, validators=[validate_no_option])
    address = models.CharField(
        max_length=255, validators=[validate_host_address],
        help_text="ssh address (host name or IP).",
    )  # fmt: skip
    port = models.PositiveIntegerField(
        default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    user = models.CharField(max_length=64, default="root", validators=[login_name_validator])
    key_file = models.CharField(
        max_length=255,
        validators=[validate_key_file],
        help_text="Path of the runner's private ssh key on the worker hosts (a reference: the "
        "key itself is never stored here; Ansible installs it).",
    )
    host_key = models.CharField(
        max_length=1024,
        validators=[
            RegexValidator(
                r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,2}\Z",
                "a public key as in known_hosts: '<type> <base64>', nothing else",
            )
        ],
        help_text='The host\'s pinned public ssh key, "<type> <base64>" as in known_hosts. '
        "A host offering another key is refused.",
    )
    hardware_class = models.CharField(
        max_length=64, blank=True,
        help_text="Hosts of one class are identical machines: a comparison's runs may use any "
        "of them. Empty: this host is a class of its own.",
    )  # fmt: skip
    console_command = models.TextField(
        validators=[validate_template],
        help_text="A command whose output is the host's console (ipmitool ... sol activate, a "
        "console server, a TCP serial). {name}, {address} and {port} are filled in; end "
        "options with -- before them where the tool allows it (docs/lab.md).",
    )
    power_command = models.TextField(
        validators=[validate_template],
        help_text="Commands, one per line, that power-cycle the host into its known-good "
        "kernel (ipmitool ... chassis power cycle; virsh destroy + start). A line that fails "
        "does not stop the next.",
    )
    console_device = models.CharField(
        max_length=32,
        default="ttyS0",
        validators=[console_device_validator],
        help_text="The kernel's console= (ttyS0, hvc0).",
    )
    boot_timeout_seconds = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(10), MaxValueValidator(3600)],
        help_text="From a restart or power cycle until its sshd answers.",
    )  # fmt: skip
    state = models.CharField(max_length=16, choices=State, default=State.AVAILABLE)
    state_reason = models.TextField(blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Read before each kexec: the host is handed out again only with another one.
    boot_id = models.CharField(max_length=36, blank=True)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The run it serves now.",
    )  # fmt: skip
    # Read from the host (probe): what the report and the SMT benchmark rely on.
    arch = models.CharField(max_length=16, choices=Arch, blank=True)
    kernel_release = models.CharField(max_length=128, blank=True)
    cpus = models.PositiveIntegerField(null=True, blank=True)
    sockets = models.PositiveIntegerField(null=True, blank=True)
    cores = models.PositiveIntegerField(null=True, blank=True, help_text="Per socket.")
    threads = models.PositiveIntegerField(null=True, blank=True, help_text="SMT threads per core.")
    smt_control = models.CharField(max_length=16, blank=True)
    probed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["target", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def machine_class(self) -> str:
        """The class a comparison's runs keep to (its declared class, else itself)."""
        return self.hardware_class or f"host:{self.name}"

    @property
    def topology(self) -> str:
        if self.cpus is None:
            return "not probed"
        return (f"{self.arch}, {self.cpus} CPUs ({self.sockets} x {self.cores} x "
                f"{self.threads}), SMT {self.smt_control}, {self.kernel_release}")  # fmt: skip


class LabAssignment(models.Model):
    """The hardware class a comparison's lab runs keep to, set by its first run, so A and B
    are measured on the same machine (or identical ones)."""

    comparison = models.OneToOneField(
        Comparison, on_delete=models.CASCADE, primary_key=True, related_name="lab_assignment"
    )
    machine_class = models.CharField(max_length=80)
    assigned_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"comparison {self.comparison_id} on {self.machine_class}"
