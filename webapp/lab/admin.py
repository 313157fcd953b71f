from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from webapp import logs
from webapp.lab.models import LabAssignment, LabHost, LabPool

log = logs.get(__name__)

# What the lab worker executes or reads as its identity: a staff account that is not a
# superuser sees these but cannot change them (a web login is no shell on the workers).
COMMAND_FIELDS = ("console_command", "power_command", "key_file")


@admin.register(LabHost)
class LabHostAdmin(admin.ModelAdmin):
    """Operators add hosts here (or Ansible does, through the same model); the topology
    fields are read from the host by the probe action, never typed in."""

    list_display = ["name", "target", "address", "port", "hardware_class", "state",
                    "state_reason", "topology", "run"]  # fmt: skip
    list_filter = ["target", "state", "hardware_class"]
    search_fields = ["name", "address", "hardware_class"]
    readonly_fields = ["state", "state_reason", "state_changed_at", "heartbeat_at", "run",
                       "arch", "kernel_release", "cpus", "sockets", "cores", "threads",
                       "smt_control", "probed_at"]  # fmt: skip
    actions = ["probe_hosts", "enable_hosts", "disable_hosts"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += COMMAND_FIELDS
        return fields

    def save_model(self, request: HttpRequest, obj: LabHost, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        log.info("lab host saved", host=obj.name, by=str(request.user), created=not change,
                 fields=sorted(form.changed_data))  # fmt: skip

    @admin.action(description="Read arch, kernel and CPU topology from the hosts (ssh)")
    def probe_hosts(self, request: HttpRequest, queryset: QuerySet[LabHost]) -> None:
        # Imported here, as in the actions below: admin modules load at django.setup(), and
        # the lab service loads the ssh engine (paramiko), which setup must not.
        from engine.lab.ssh import SSHError
        from webapp.lab.services import probe

        for host in queryset:
            try:
                probe(host)
            except (SSHError, ValueError) as exc:
                self.message_user(request, f"{host.name}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{host.name}: {host.topology}")

    @admin.action(description="Enable again (after repair): available for runs")
    def enable_hosts(self, request: HttpRequest, queryset: QuerySet[LabHost]) -> None:
        # Imported here: the lab service loads paramiko (see probe_hosts).
        from webapp.lab.services import enable

        for host in queryset.filter(state=LabHost.State.DISABLED):
            enable(host)

    @admin.action(description="Disable: take out of the pool")
    def disable_hosts(self, request: HttpRequest, queryset: QuerySet[LabHost]) -> None:
        # Imported here: the lab service loads paramiko (see probe_hosts).
        from webapp.lab.services import disable

        for host in queryset.exclude(state=LabHost.State.DISABLED):
            disable(host, f"disabled by {request.user}")


@admin.register(LabPool)
class LabPoolAdmin(admin.ModelAdmin):
    """Who may send kernels to a pool, and its reprovision command: both decide whether a
    submitter's kernel can own a lab host, so only superusers change them, and every
    change is logged."""

    list_display = ["target", "trust"]
    list_filter = ["trust"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += ["target", "trust", "reprovision_command"]
        return fields

    def save_model(self, request: HttpRequest, obj: LabPool, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        log.info("lab pool saved", pool=obj.target.name, trust=obj.trust, by=str(request.user),
                 created=not change, fields=sorted(form.changed_data))  # fmt: skip


@admin.register(LabAssignment)
class LabAssignmentAdmin(admin.ModelAdmin):
    list_display = ["comparison", "machine_class", "assigned_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
