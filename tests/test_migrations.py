"""Guard: every model change has its migration (and the guard fails when one is missing)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _makemigrations_check(extra_path: Path | None = None, settings: str = "webapp.settings"):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings}
    if extra_path:
        env["PYTHONPATH"] = f"{extra_path}:{ROOT}"
    return subprocess.run(
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_models_and_migrations_agree():
    result = _makemigrations_check()
    assert result.returncode == 0, f"missing migrations:\n{result.stdout}{result.stderr}"
    assert "No changes detected" in result.stdout


def test_guard_fails_on_a_model_without_migration(tmp_path):
    app = tmp_path / "guardprobe"
    (app / "migrations").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "migrations" / "__init__.py").write_text("")
    (app / "models.py").write_text(
        "from django.db import models\n\n\nclass Probe(models.Model):\n"
        "    name = models.CharField(max_length=10)\n"
    )
    (tmp_path / "probe_settings.py").write_text(
        "from webapp.settings import *  # noqa: F403\n"
        "INSTALLED_APPS = [*INSTALLED_APPS, 'guardprobe']  # noqa: F405\n"
    )
    result = _makemigrations_check(tmp_path, settings="probe_settings")
    assert result.returncode == 1
    assert "Create model Probe" in result.stdout
