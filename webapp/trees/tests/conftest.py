"""Fixtures of the build service tests."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings


@pytest.fixture
def data_dir(settings, monkeypatch, kernel_data_dir) -> Iterator[Path]:
    """The session's kernel data dir and the machine's ccache, in the settings and in the
    environment (for a worker process started after this fixture)."""
    root = kernel_data_dir
    overrides = {
        "RCUBENCH_CCACHE_DIR": str(django_settings.RCUBENCH_CCACHE_DIR),
        "RCUBENCH_DATA_DIR": str(root),
        "RCUBENCH_BUILD_MIN_FREE_GB": "1",
    }
    for name, value in overrides.items():
        monkeypatch.setenv(name, value)
    settings.RCUBENCH_CCACHE_DIR = overrides["RCUBENCH_CCACHE_DIR"]
    settings.RCUBENCH_DATA_DIR = str(root)
    settings.RCUBENCH_BUILD_MIN_FREE_GB = 1.0
    return root
