"""Fixtures of the lab pool tests: the stand-in (engine/lab/tests/standin.py) as the one
host of a lab pool, and the settings of the real worker processes that run on it."""

import os

import pytest

from engine.lab.runner import LabHost as EngineHost
from engine.lab.tests.fakehost import fake_host  # noqa: F401  (a fixture)
from engine.lab.tests.standin import standin  # noqa: F401  (a fixture)
from webapp.comparisons.models import Target
from webapp.lab.models import LabHost

POOL = "lab-standin"


@pytest.fixture
def lab_host(standin: EngineHost) -> LabHost:  # noqa: F811
    """The pool (a Target of kind lab) and the stand-in as its host, as an operator would
    enter them in the admin."""
    pool = Target.objects.create(name=POOL, kind=Target.Kind.LAB, arch="x86_64", threads=2,
                                 description="the stand-in")  # fmt: skip
    e = standin.endpoint
    return LabHost.objects.create(
        target=pool, name=standin.name, address=e.address, port=e.port, user=e.user,
        key_file=str(e.key_file), host_key=e.host_key,
        console_command=standin.console_command, power_command=standin.power_command,
        boot_timeout_seconds=int(standin.boot_timeout),
    )  # fmt: skip


@pytest.fixture
def lab_env(x86_kernel, kernel_data_dir, settings) -> dict[str, str]:
    """Settings of the worker processes (and of this process, which submits)."""
    values = {
        "RCUBENCH_DATA_DIR": str(kernel_data_dir),  # the session's mirrors and artifacts
        "RCUBENCH_CCACHE_DIR": os.environ.get("RCUBENCH_CCACHE_DIR", "/var/lib/rcubench/ccache"),
        "RCUBENCH_ALLOW_FEW_RUNS": "1",
        "RCUBENCH_BOOT_TIMEOUT_SECONDS": "60",
        "RCUBENCH_BENCH_TIMEOUT_SECONDS": "60",
        "RCUBENCH_REAPER_INTERVAL_SECONDS": "2",
        "RCUBENCH_REDISPATCH_SECONDS": "30",
        "RCUBENCH_CANCEL_POLL_SECONDS": "0.5",
        "RCUBENCH_LAB_RECOVERY_TRIES": "1",
        # The worker is started for the VM target and picks up the lab pool by its pattern.
        "RCUBENCH_BENCH_TARGETS": "qemu-x86_64",
        "RCUBENCH_SERVE": "qemu-x86_64,lab-*",
        "RCUBENCH_INSTANCE": "test-",
    }
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    settings.RCUBENCH_DATA_DIR = str(kernel_data_dir)
    settings.RCUBENCH_BOOT_TIMEOUT_SECONDS = 60
    settings.RCUBENCH_BENCH_TIMEOUT_SECONDS = 60
    settings.RCUBENCH_LAB_RECOVERY_TRIES = 1
    return values
