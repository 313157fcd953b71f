"""qemu-ppc64le becomes pseries 1 x 1 x 8 (SMT8), so smt-toggle runs on it.

QEMU 7.2's pseries refused SMT threads under TCG; ppc64le now runs on QEMU 10.0 from
bookworm-backports, which boots pseries with threads=8. Only the migrated default row is
changed: a target an operator already edited keeps its shape.
"""

from django.db import migrations

OLD = {"sockets": 1, "cores": 4, "threads": 1}
NEW = {
    "sockets": 1,
    "cores": 1,
    "threads": 8,
    "description": "QEMU ppc64le pseries, 1 socket x 1 core x 8 threads (SMT8), QEMU 10.0 TCG.",
}


def to_smt8(apps, schema_editor):  # type: ignore[no-untyped-def]
    Target = apps.get_model("comparisons", "Target")
    Target.objects.filter(name="qemu-ppc64le", **OLD).update(**NEW)


def back(apps, schema_editor):  # type: ignore[no-untyped-def]
    Target = apps.get_model("comparisons", "Target")
    Target.objects.filter(name="qemu-ppc64le", sockets=1, cores=1, threads=8).update(
        **OLD, description="QEMU ppc64le pseries, 4 cores, no SMT (pseries TCG refuses threads>1)."
    )


class Migration(migrations.Migration):
    dependencies = [("comparisons", "0003_run_per_benchmark")]
    operations = [migrations.RunPython(to_smt8, back)]
