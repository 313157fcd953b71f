"""The two QEMU targets every deployment starts with (operators add lab pools in the admin).

Shapes follow shared/KERNEL-NOTES.md: x86_64 with 2 threads per core so SMT can be toggled;
ppc64le pseries with 1 thread per core because QEMU 7.2's pseries refuses SMT under TCG.
"""

from django.db import migrations

TARGETS = [
    {
        "name": "qemu-x86_64",
        "kind": "qemu",
        "arch": "x86_64",
        "machine": "pc",
        "sockets": 1,
        "cores": 2,
        "threads": 2,
        "memory_mb": 1024,
        "description": "QEMU x86_64, 1 socket x 2 cores x 2 threads (SMT on).",
    },
    {
        "name": "qemu-ppc64le",
        "kind": "qemu",
        "arch": "ppc64le",
        "machine": "pseries",
        "sockets": 1,
        "cores": 4,
        "threads": 1,
        "memory_mb": 1024,
        "description": "QEMU ppc64le pseries, 4 cores, no SMT (pseries TCG refuses threads>1).",
    },
]


def add_targets(apps, schema_editor):  # type: ignore[no-untyped-def]
    Target = apps.get_model("comparisons", "Target")
    for fields in TARGETS:
        Target.objects.get_or_create(name=fields["name"], defaults=fields)


def remove_targets(apps, schema_editor):  # type: ignore[no-untyped-def]
    Target = apps.get_model("comparisons", "Target")
    Target.objects.filter(name__in=[t["name"] for t in TARGETS], comparisons__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("comparisons", "0001_initial")]
    operations = [migrations.RunPython(add_targets, remove_targets)]
