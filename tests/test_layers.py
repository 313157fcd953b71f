"""The layer rules: benchmarks/ and the engine under workers/ never import the web app or
Django; the statistics engine (webapp/analysis stats, engine, calibration) imports neither
Django nor the models and services.

The contracts live in pyproject.toml ([tool.importlinter]); the second test runs them on a
tree that breaks each, so these guards are known to fail when they should.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _run(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_project_keeps_the_layer_contract():
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


def test_contract_catches_an_engine_module_importing_django(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for package in contract["root_packages"]:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "workers" / "vm").mkdir()
    (tmp_path / "workers" / "vm" / "__init__.py").write_text("")
    (tmp_path / "workers" / "build").mkdir()
    (tmp_path / "workers" / "build" / "__init__.py").write_text("")
    (tmp_path / "workers" / "routing.py").write_text("")
    (tmp_path / "workers" / "console.py").write_text("")
    (tmp_path / "workers" / "lab").mkdir()
    (tmp_path / "workers" / "lab" / "__init__.py").write_text("")
    (tmp_path / "workers" / "lab" / "runner.py").write_text("import webapp.lab.models\n")
    (tmp_path / "workers" / "vm" / "runner.py").write_text("from django.db import models\n")
    (tmp_path / "benchmarks" / "parser.py").write_text("import webapp.settings\n")
    (tmp_path / "webapp" / "settings.py").write_text("")
    for package in ("analysis", "comparisons", "trees", "reports", "watch", "webhooks"):
        (tmp_path / "webapp" / package).mkdir()
        (tmp_path / "webapp" / package / "__init__.py").write_text("")
    for package in ("reports", "watch"):
        (tmp_path / "webapp" / package / "figures.py").write_text("")
    for package in ("watch", "webhooks"):
        (tmp_path / "webapp" / package / "models.py").write_text("")
    for module in ("stats", "calibration", "modality", "changepoints", "models", "services"):
        (tmp_path / "webapp" / "analysis" / f"{module}.py").write_text("")
    (tmp_path / "webapp" / "analysis" / "engine.py").write_text(
        "from webapp.analysis import models\n"
    )
    (tmp_path / "workers" / "tasks.py").write_text("")
    (tmp_path / "webapp" / "comparisons" / "orchestrator.py").write_text(
        "from workers import tasks\n"
    )
    (tmp_path / "webapp" / "comparisons" / "models.py").write_text("from engine.vm import runner\n")
    for name in ("apps", "consoles"):
        (tmp_path / "webapp" / "comparisons" / f"{name}.py").write_text("")
    (tmp_path / "webapp" / "trees" / "models.py").write_text("")
    (tmp_path / "webapp" / "lab").mkdir()
    (tmp_path / "webapp" / "lab" / "__init__.py").write_text("")
    (tmp_path / "webapp" / "lab" / "models.py").write_text("import paramiko\n")
    (tmp_path / "webapp" / "alerts").mkdir()
    (tmp_path / "webapp" / "alerts" / "__init__.py").write_text("")
    (tmp_path / "webapp" / "alerts" / "models.py").write_text("")
    (tmp_path / "workers" / "build" / "builder.py").write_text("")
    for name in ("registry", "spec"):
        (tmp_path / "benchmarks" / f"{name}.py").write_text("")
    (tmp_path / "benchmarks" / "bpf_slab").mkdir()
    (tmp_path / "benchmarks" / "bpf_slab" / "__init__.py").write_text("")
    (tmp_path / "webapp" / "reports" / "services.py").write_text(
        "from benchmarks import registry, spec\nfrom benchmarks import bpf_slab\n"
    )

    result = _run(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)  # drop colour codes
    for broken in (
        "engine.vm.runner -> django (l.1)",
        "benchmarks.parser -> webapp.settings (l.1)",
        "stats.verdicts -> webapp.analysis.models (l.1)",
        "webapp.comparisons.orchestrator -> workers.tasks (l.1)",
        "webapp.comparisons.models -> engine.vm.runner (l.1)",
        "webapp.reports.services -> benchmarks.bpf_slab (l.2)",
        "engine.lab.runner -> webapp.lab.models (l.1)",
        "webapp.lab.models -> paramiko (l.1)",
    ):
        assert broken in output


def test_django_setup_loads_no_libvirt_vm_runner_or_build_engine():
    """What every process pays at start (web workers, the CLI, the admin): models, apps and
    admin modules only, none of the engine (libvirt needs its daemon's library)."""
    code = (
        "import sys, django; django.setup(); "
        "import django.contrib.admin; django.contrib.admin.autodiscover(); "
        "print(sorted(m for m in sys.modules if m == 'libvirt' or m.startswith("
        "('engine.vm.runner', 'engine.build.builder', 'workers.tasks'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "webapp.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"
