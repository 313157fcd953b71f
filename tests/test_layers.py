"""The house's import rules (HOUSE.md): the contracts of pyproject.toml [tool.importlinter].

The real tree keeps every one of them. A scratch tree with the modules they name keeps them
too; then one deliberate import per contract (a few for the floors) breaks it, and each
contract must report its own break: so every contract is known to fail when it should, and
a contract added without a break here fails `test_every_contract_has_a_deliberate_break`.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
IMPORTLINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = [contract["name"] for contract in IMPORTLINTER["contracts"]]

# A tree that keeps every contract: the modules they name, with the imports the house allows
# (the worker over the web app over the libraries, pages and API over the summary, models
# toward comparisons/models.py, the report over the registry and specs) and those that
# their ignore_imports expect (import-linter refuses an ignore that matches no import).
KEPT: dict[str, tuple[str, ...]] = {
    "workers/__init__.py": (),
    "workers/celery_app.py": ("import celery", "from webapp import celery"),
    "workers/tasks.py": ("from engine.build import builder", "from webapp.comparisons import runs"),
    "webapp/__init__.py": (),
    "webapp/settings.py": ("import django",),
    "webapp/celery.py": ("import celery", "from webapp import routing"),
    "webapp/routing.py": (),
    "webapp/dispatch.py": ("from webapp import celery, routing",),
    "webapp/access.py": ("from webapp.trees import models",),
    "webapp/plotly.py": ("import plotly",),
    "webapp/accounts/__init__.py": (),
    "webapp/accounts/views.py": ("import django", "from webapp import access"),
    "webapp/trees/__init__.py": (),
    "webapp/trees/models.py": (),
    "webapp/trees/services.py": (
        "from engine.build import builder",
        "from webapp.trees import models",
    ),
    "webapp/comparisons/__init__.py": (),
    "webapp/comparisons/models.py": ("from webapp.trees import models",),
    "webapp/comparisons/apps.py": (),
    "webapp/comparisons/consoles.py": (),
    "webapp/comparisons/summary.py": ("from webapp.analysis import models",),
    "webapp/comparisons/runs.py": (
        "from engine.vm import runner",
        "from webapp.comparisons import models",
    ),
    "webapp/comparisons/orchestrator.py": (
        "from webapp import dispatch",
        "from webapp.comparisons import runs",
    ),
    "webapp/analysis/__init__.py": (),
    "webapp/analysis/models.py": ("from webapp.comparisons import models",),
    "webapp/analysis/services.py": (
        "from stats import verdicts",
        "from webapp.analysis import models",
    ),
    "webapp/lab/__init__.py": (),
    "webapp/lab/models.py": ("from webapp.comparisons import models",),
    "webapp/bisections/__init__.py": (),
    "webapp/bisections/models.py": ("from webapp.comparisons import models",),
    "webapp/bisections/services.py": (
        "from stats import bisection",
        "from webapp.comparisons import orchestrator",
    ),
    "webapp/regressions/__init__.py": (),
    "webapp/regressions/models.py": ("from webapp.watch import models",),
    "webapp/regressions/services.py": ("from webapp.regressions import models",),
    "webapp/sweeps/__init__.py": (),
    "webapp/sweeps/models.py": ("from webapp.comparisons import models",),
    "webapp/sweeps/services.py": (
        "from stats import sweeps",
        "from webapp.comparisons import orchestrator",
    ),
    "webapp/watch/__init__.py": (),
    "webapp/watch/models.py": ("from webapp.trees import models",),
    "webapp/watch/figures.py": ("import plotly",),
    "webapp/alerts/__init__.py": (),
    "webapp/alerts/models.py": ("from webapp.comparisons import models",),
    "webapp/alerts/messages.py": ("from webapp.comparisons import summary",),
    "webapp/alerts/tests/__init__.py": (),
    "webapp/alerts/tests/test_delivery.py": ("from workers import celery_app",),
    "webapp/webhooks/__init__.py": (),
    "webapp/webhooks/models.py": ("from webapp.watch import models",),
    "webapp/reports/__init__.py": (),
    "webapp/reports/figures.py": ("import plotly", "from stats import verdicts"),
    "webapp/reports/pages.py": (
        "from benchmarks import registry, spec",
        "from webapp.comparisons import summary",
        "from webapp.reports import figures",
    ),
    "webapp/api/__init__.py": (),
    "webapp/api/views.py": ("import rest_framework", "from webapp.comparisons import summary"),
    "engine/__init__.py": (),
    "engine/build/__init__.py": (),
    "engine/build/builder.py": (),
    "engine/run/__init__.py": (),
    "engine/run/console.py": (),
    "engine/run/outcomes.py": (),
    "engine/vm/__init__.py": (),
    "engine/vm/runner.py": ("import libvirt", "from engine.run import console"),
    "engine/vm/tests/__init__.py": (),
    "engine/vm/tests/test_runner.py": (
        "from benchmarks import registry",
        "from engine.vm import runner",
    ),
    "engine/lab/__init__.py": (),
    "engine/lab/runner.py": ("import paramiko", "from engine.run import console"),
    "stats/__init__.py": (),
    "stats/verdicts.py": ("import numpy",),
    "stats/bisection.py": (),
    "benchmarks/__init__.py": (),
    "benchmarks/spec.py": (),
    "benchmarks/registry.py": ("from benchmarks import bpf_slab, spec",),
    "benchmarks/bpf_slab/__init__.py": ("from benchmarks import spec",),
}

# Each contract (by the start of its name) and the imports that break it: each appended to
# its file, each to be reported under that contract.
BREAKS: dict[str, list[tuple[str, str]]] = {
    "Floors": [
        # The engine reaching up into the web app, the web app into the worker, and one
        # library into its sibling.
        ("engine/vm/runner.py", "from webapp.lab import models"),
        ("webapp/comparisons/orchestrator.py", "from workers import tasks"),
        ("stats/verdicts.py", "from engine.run import outcomes"),
    ],
    "The libraries run without Django": [
        ("engine/lab/runner.py", "from django.db import models"),
        ("webapp/routing.py", "from celery import shared_task"),
    ],
    "Figure builders are pure": [("webapp/watch/figures.py", "from webapp.trees import models")],
    "Front ends are leaves": [
        ("webapp/alerts/messages.py", "from webapp.reports import pages"),
        ("webapp/bisections/services.py", "from webapp.api import views"),
    ],
    "Pages and the REST API": [("webapp/api/views.py", "from webapp.reports import pages")],
    "The report knows benchmarks only through the registry": [
        ("webapp/reports/pages.py", "from benchmarks import bpf_slab"),
    ],
    "Models import no engine machinery and no services": [
        ("webapp/watch/models.py", "from webapp.comparisons import runs"),
        ("webapp/trees/models.py", "from webapp.trees import services"),
        ("webapp/comparisons/consoles.py", "from engine.run import console"),
    ],
}
KEPT_PACKAGES = {path.split("/")[0] for path in KEPT}


def _run(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def _plain(result: subprocess.CompletedProcess[str]) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # drop colour codes


def _module(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _scratch_tree(root: Path, breaks: dict[str, list[tuple[str, str]]]) -> dict[str, list[str]]:
    """KEPT under `root` with the project's contracts, and `breaks` appended to it; gives
    what lint-imports must then report under each contract ("a.b -> c.d (l.N)": a package
    outside the tree is reported by its top name)."""
    (root / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    files = {path: list(lines) for path, lines in KEPT.items()}
    expected: dict[str, list[str]] = {}
    for contract, imports in breaks.items():
        for path, line in imports:
            files[path].append(line)
            _, package, _, name = line.split()  # "from package import name"
            top = package.split(".")[0]
            imported = f"{package}.{name}" if top in KEPT_PACKAGES else top
            expected.setdefault(contract, []).append(
                f"{_module(path)} -> {imported} (l.{len(files[path])})"
            )
    for path, lines in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("".join(f"{line}\n" for line in lines))
    return expected


def _sections(output: str) -> dict[str, str]:
    """The report of each broken contract, by the start of its name as BREAKS has it."""
    report = output.split("Broken contracts", 1)[-1]
    heads = sorted(
        (report.index(f"\n{name}\n"), name) for name in CONTRACTS if f"\n{name}\n" in report
    )
    ends = [start for start, _ in heads[1:]] + [len(report)]
    sections = {name: report[start:end] for (start, name), end in zip(heads, ends, strict=True)}
    return {key: text for key in BREAKS for name, text in sections.items() if name.startswith(key)}


def _lone_imports(section: str) -> set[str]:
    """The imports a contract's report names as breaks by themselves: chains of one link
    ("- a -> b (l.N)"), not links of a longer chain that breaks it for another module."""
    chains: list[list[str]] = []
    chain: list[str] | None = None
    for line in section.splitlines():
        if line.startswith("-"):
            chain = [line.lstrip("- ").strip()]
            chains.append(chain)
        elif chain is not None and line.startswith(" ") and line.strip():
            chain.append(line.strip())
        else:
            chain = None
    return {links[0] for links in chains if len(links) == 1}


def test_every_contract_has_a_deliberate_break():
    matched = {key: [name for name in CONTRACTS if name.startswith(key)] for key in BREAKS}
    assert all(len(names) == 1 for names in matched.values()), matched
    assert sorted(name for names in matched.values() for name in names) == sorted(CONTRACTS)


def test_project_keeps_the_layer_contract():
    result = _run(ROOT)
    assert result.returncode == 0, _plain(result)
    assert "7 kept, 0 broken" in _plain(result)  # the house's seven rules (HOUSE.md)


def test_the_scratch_tree_keeps_every_contract_until_it_is_broken(tmp_path):
    _scratch_tree(tmp_path, breaks={})
    result = _run(tmp_path)
    assert result.returncode == 0, _plain(result)
    assert f"{len(CONTRACTS)} kept, 0 broken" in _plain(result)


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> tuple[dict[str, list[str]], subprocess.CompletedProcess[str]]:
    """The scratch tree with every break, and lint-imports' verdict on it (run once)."""
    root = tmp_path_factory.mktemp("broken")
    return _scratch_tree(root, BREAKS), _run(root)


@pytest.mark.parametrize("contract", BREAKS)
def test_each_contract_reports_its_own_break(broken, contract):
    expected, result = broken
    output = _plain(result)
    assert result.returncode != 0
    assert f"0 kept, {len(CONTRACTS)} broken" in output, output
    reported = _lone_imports(_sections(output).get(contract, ""))
    for line in expected[contract]:
        assert line in reported, f"{line!r} is no break of {contract!r} by itself:\n{output}"


def test_django_setup_loads_no_libvirt_vm_runner_or_build_engine():
    """What every process pays at start (web workers, the CLI, the admin): models, apps and
    admin modules only, none of the engine (libvirt needs its daemon's library)."""
    code = (
        "import sys, django; django.setup(); "
        "import django.contrib.admin; django.contrib.admin.autodiscover(); "
        "print(sorted(m for m in sys.modules if m == 'libvirt' or m.startswith("
        "('engine.vm', 'engine.lab', 'engine.build.builder', 'engine.run.console', "
        "'workers'))))"
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
