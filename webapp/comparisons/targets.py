"""Targets generated from a base target and a topology, for sweeps (issue 36).

A sweep over the topology axis runs each point on a target derived from one base: the same
kind, arch and machine, another sockets x cores x threads, memory by the rule of
engine/vm/topology.py. Nobody makes one per point by hand: `derived_target(base, topology)`
returns the row, made on first use under a deterministic name, "<base>--SxCxT". It runs
on its base's queue (Target.queue), so the workers that serve the base run it; the run reads
the topology from the derived row (webapp/comparisons/runs.py). A topology the host cannot
run is refused with the reason (`TopologyRefused`), before anything is stored.
"""

import hashlib

from django.conf import settings
from django.db import IntegrityError, transaction

from engine.vm.topology import Topology, check, memory_for
from webapp.comparisons.models import Target, derivation_refusal

NAME_MAX = 64  # Target.name's max_length
_SEP = "--"


class TopologyRefused(ValueError):
    """No target can be derived from this base with this topology: `message` says why (a
    sweep's submission shows it on its field)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def topology_of(target: Target) -> Topology:
    return Topology(target.sockets, target.cores, target.threads)


def derived_name(base_name: str, topology: Topology) -> str:
    """ "<base>--SxCxT": a slug within Target.name's 64 characters. A base name too long
    for it is cut and given 8 hex digits of its hash, so two long bases never share one."""
    suffix = f"{_SEP}{topology}"
    if len(base_name) + len(suffix) <= NAME_MAX:
        return f"{base_name}{suffix}"
    digest = hashlib.sha256(base_name.encode()).hexdigest()[:8]
    return f"{base_name[: NAME_MAX - len(suffix) - 9]}-{digest}{suffix}"


def derived_target(base: Target, topology: Topology) -> Target:
    """The target that is `base` with `topology`: `base` itself when the topology is its
    own, else the derived target (made now if it does not exist yet; idempotent, and safe
    when called at once from two transactions). Raises TopologyRefused: a lab or derived
    base, a topology engine.vm.topology.check refuses (with RCUBENCH_MAX_VCPUS as the
    host's allowance), or the derived name taken by another target."""
    if why := derivation_refusal(base):
        raise TopologyRefused(why)
    if why := check(base.arch, base.machine, topology, settings.RCUBENCH_MAX_VCPUS):
        raise TopologyRefused(f"{topology} on {base.name}: {why}")
    if topology == topology_of(base):
        return base
    name = derived_name(base.name, topology)
    fields = {
        "kind": base.kind,
        "arch": base.arch,
        "machine": base.machine,
        "memory_mb": memory_for(base.memory_mb, base.cpus, topology.cpus),
    }
    target = Target.objects.filter(name=name).first()
    if target is None:
        try:
            with transaction.atomic():  # a savepoint: the caller's transaction goes on
                return Target.objects.create(
                    name=name, base=base, sockets=topology.sockets, cores=topology.cores,
                    threads=topology.threads, enabled=True,
                    description=f"Generated from {base.name} with {topology} "
                    "(sockets x cores x threads) for sweeps.",
                    **fields,
                )  # fmt: skip
        except IntegrityError:  # made meanwhile by a concurrent call
            target = Target.objects.get(name=name)
    if target.base_id != base.pk or topology_of(target) != topology:
        raise TopologyRefused(
            f"target {name} exists and is not {base.name} with {topology}: rename it"
        )
    # The base was edited since (machine, memory): the generated row follows it.
    stale = {field: value for field, value in fields.items() if getattr(target, field) != value}
    if stale:
        Target.objects.filter(pk=target.pk).update(**stale)
        for field, value in stale.items():
            setattr(target, field, value)
    return target
