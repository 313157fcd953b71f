"""./manage.py lab_host POOL NAME --address A --host-key "ssh-ed25519 ..." ...: add or update
a lab host of a lab pool (creating the pool's Target if asked, and setting whose kernels the
pool takes), then probe it over ssh. Idempotent, for Ansible's inventory or an operator's
shell; the admin does the same."""

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from webapp.comparisons.models import Target
from webapp.lab.models import LabHost, LabPool
from webapp.states import Arch

_FIELDS = ("address", "port", "user", "key_file", "host_key", "hardware_class",
           "console_command", "power_command", "console_device",
           "boot_timeout_seconds")  # fmt: skip


class Command(BaseCommand):
    help = "Add or update a lab host of a lab pool and read its topology over ssh."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("pool", help="the lab pool (a Target of kind lab)")
        parser.add_argument("name", help="the host's name (unique)")
        parser.add_argument("--arch", choices=Arch.values,
                            help="create the pool with this arch if it does not exist")  # fmt: skip
        parser.add_argument("--address")
        parser.add_argument("--port", type=int)
        parser.add_argument("--user")
        parser.add_argument("--key-file", help="the runner's private key on the worker hosts")
        parser.add_argument("--host-key", help='the pinned public key, "<type> <base64>"')
        parser.add_argument("--hardware-class")
        parser.add_argument("--console-command")
        parser.add_argument("--power-command", help="one command per line")
        parser.add_argument("--console-device")
        parser.add_argument("--boot-timeout-seconds", type=int)
        parser.add_argument("--trust", choices=LabPool.Trust.values,
                            help="whose kernels the pool takes (docs/lab.md): trusted (the "
                            "default) or reprovisioned (any submitter's)")  # fmt: skip
        parser.add_argument("--reprovision-command",
                            help="the pool's, one command per line: run after every run of "
                            "a pool that takes untrusted kernels")  # fmt: skip
        parser.add_argument("--no-probe", action="store_true", help="do not ssh to the host")

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():  # a pool made for a host that is refused is not kept
            host = self._save(options)
        if options["no_probe"]:
            return
        # Imported here: probing loads the ssh engine (paramiko), which --no-probe never needs.
        from engine.lab.ssh import SSHError
        from webapp.lab.services import probe

        try:
            probe(host)
        except (SSHError, ValueError) as exc:
            raise CommandError(f"{host.name}: {exc}") from exc
        self.stdout.write(f"{host.name}: {host.topology}")

    def _save(self, options: dict[str, Any]) -> LabHost:
        pool = self._pool(options["pool"], options["arch"])
        self._policy(pool, options["trust"], options["reprovision_command"])
        host = LabHost.objects.filter(name=options["name"]).first()
        if host is not None and host.target_id != pool.pk:
            raise CommandError(f"lab host {host.name} belongs to pool {host.target}")
        host = host or LabHost(target=pool, name=options["name"])
        given = {f: options[f] for f in _FIELDS if options[f] is not None}
        for field, value in given.items():
            setattr(host, field, value)
        try:
            host.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in
                                         exc.message_dict.items())) from exc  # fmt: skip
        created = host.pk is None
        host.save()
        self.stdout.write(f"{'added' if created else 'updated'} lab host {host.name} in {pool}")
        return host

    def _policy(self, pool: Target, trust: str | None, reprovision: str | None) -> None:
        policy = LabPool.objects.filter(target=pool).first() or LabPool(target=pool)
        if not policy._state.adding and trust is None and reprovision is None:
            return  # an existing pool keeps its policy
        policy.trust = trust or policy.trust
        if reprovision is not None:
            policy.reprovision_command = reprovision
        try:
            policy.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in
                                         exc.message_dict.items())) from exc  # fmt: skip
        policy.save()
        self.stdout.write(f"lab pool {pool}: {policy.trust}")

    def _pool(self, name: str, arch: str | None) -> Target:
        pool = Target.objects.filter(name=name).first()
        if pool is None:
            if arch is None:
                raise CommandError(f"no target named {name!r} (give --arch to create the pool)")
            pool = Target.objects.create(name=name, kind=Target.Kind.LAB, arch=arch)
            self.stdout.write(f"added lab pool {name} ({arch})")
        if not pool.is_lab:
            raise CommandError(f"target {name} is a {pool.kind} target, not a lab pool")
        return pool
