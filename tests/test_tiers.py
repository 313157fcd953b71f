"""The two tiers: `make check` runs `pytest -m "not system"`, and the root conftest.py marks
`system` every test that builds, boots, spawns, serves or deploys, from the fixtures it uses
and its place (HOUSE.md, "Tests in two tiers").

One real collection of the whole suite with `-m "not system"`, in a process of its own as
`make check` runs it, records what was kept and what `-m` deselected: known system tests of
each kind must be deselected (so the mark is set before `-m` reads it), tests that need at
most the database must stay, and every fixture that makes a test a system test must still be
used by one (a renamed fixture would silently move its tests into `make check`). The
Makefile's two targets are read too: `check` deselects `system`, `test` runs everything.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SYSTEM_FIXTURES, SYSTEM_PATHS

ROOT = Path(__file__).resolve().parents[1]

# Records the items kept and those deselected, with their fixtures, then collects.
COLLECT = """
import json, sys
import pytest

class Record:
    def __init__(self):
        self.deselected = []

    def pytest_deselected(self, items):
        self.deselected += items

    def pytest_collection_finish(self, session):
        def fixtures(items):
            return {item.nodeid: sorted(item.fixturenames) for item in items}

        with open(sys.argv[1], "w") as out:
            json.dump({"kept": fixtures(session.items),
                       "deselected": fixtures(self.deselected)}, out)

args = ["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not system"]
sys.exit(pytest.main(args, plugins=[Record()]))
"""

SYSTEM = [
    # kernel builds
    "engine/build/tests/test_builder.py::test_x86_build_gives_a_bootable_image_and_its_config",
    "webapp/trees/tests/test_services.py::test_a_bad_ref_ends_the_build_as_failed_with_the_reason",
    # the kernel git mirror
    "engine/build/tests/test_git.py::test_tag_branch_and_sha_resolve_to_the_same_commit",
    # VM boots, one of them through a fixture of a fixture (comparison -> x86_kernel)
    "engine/vm/tests/test_runner.py::test_a_kernel_that_panics_gives_panic_with_the_message",
    "webapp/comparisons/tests/test_run_service.py::test_a_run_stores_every_metric_of_its_benchmark",
    # worker processes
    "workers/tests/test_celery_roundtrip.py::test_reaper_task_round_trip_updates_the_database",
    "webapp/comparisons/tests/test_end_to_end.py::test_a_comparison_from_the_cli_to_the_report",
    # the headless browser, a live server, the lab stand-in
    "webapp/reports/tests/test_browser.py::test_report_renders_charts_and_verdicts",
    "webapp/webhooks/tests/test_post_receive.py::test_post_receive_reports_the_push",
    "engine/lab/tests/test_standin.py::test_the_probe_reads_the_hosts_topology_and_kexec",
    # deploy (by place, whatever the fixtures), and a test that spawns gunicorn itself
    "tests/deploy/test_setup.py::test_setup_second_run_reports_nothing_to_do",
    "tests/deploy/test_deploy.py::test_compose_file_validates",
    "tests/deploy/test_compose.py::test_web_answers_healthz_on_localhost_only",
    "webapp/tests/test_web_load.py::test_web_load_seeds_serves_and_measures_every_url_kind",
]
CHECK = [
    # the database, beside system tests of the same module
    "webapp/trees/tests/test_services.py::test_a_malformed_kconfig_line_is_refused_and_nothing_is_stored",
    "webapp/webhooks/tests/test_post_receive.py::test_post_receive_unconfigured_warns_and_exits_0",
    "webapp/trees/tests/test_models.py::test_a_revision_has_one_build_per_arch_and_config",
    # pure, under the VM tests' conftest and beside the mirror's tests
    "engine/vm/tests/test_console.py::test_clip_keeps_head_and_tail_and_says_how_many_bytes_were_cut",
    "engine/build/tests/test_git.py::test_mirror_paths_are_distinct_per_url",
    # the guards
    "tests/test_layers.py::test_project_keeps_the_layer_contract",
    "tests/test_tiers.py::test_every_system_fixture_and_place_still_names_a_test",
]  # fmt: skip


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict[str, dict[str, list[str]]]:
    out = tmp_path_factory.mktemp("tiers") / "collected.json"
    done = subprocess.run([sys.executable, "-c", COLLECT, str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("nodeid", SYSTEM)
def test_known_system_tests_are_left_to_make_test(collected, nodeid):
    assert nodeid in collected["deselected"], f"{nodeid} is not deselected by -m 'not system'"


@pytest.mark.parametrize("nodeid", CHECK)
def test_tests_that_need_at_most_the_database_stay_in_make_check(collected, nodeid):
    assert nodeid in collected["kept"], f"{nodeid} is not kept by -m 'not system'"


def test_every_system_fixture_and_place_still_names_a_test(collected):
    system = collected["deselected"]
    unused = [name for name in SYSTEM_FIXTURES if not any(name in f for f in system.values())]
    assert not unused, f"no test uses these system fixtures any more: {unused}"
    empty = [place for place in SYSTEM_PATHS if not any(n.startswith(place) for n in system)]
    assert not empty, f"no test under these system places any more: {empty}"


def test_no_test_kept_for_make_check_uses_a_system_fixture(collected):
    leaks = {
        nodeid: sorted(set(fixtures) & set(SYSTEM_FIXTURES))
        for nodeid, fixtures in collected["kept"].items()
        if set(fixtures) & set(SYSTEM_FIXTURES)
    }
    assert not leaks
    # Most of the suite needs at most the database (HOUSE.md): an autouse fixture turned
    # system would empty `make check` without any test above noticing.
    assert len(collected["kept"]) > 2 * len(collected["deselected"])


def _recipe(target: str) -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert found, f"no {target} target in the Makefile"
    return [line.strip() for line in found.group(1).splitlines()]


def test_make_check_runs_the_checks_and_the_tests_that_are_not_system():
    assert _recipe("check") == [
        "$(MAKE) --no-print-directory lint typecheck layers",
        '$(VENV)/bin/pytest -m "not system" -n auto $(PYTEST_ARGS)',
    ]


def test_make_test_still_runs_every_test():
    assert _recipe("test") == ["$(MAKE) --no-print-directory lint typecheck layers pytest"]
    assert _recipe("pytest") == [
        '$(VENV)/bin/pytest -m "not system" -n auto $(PYTEST_ARGS)',
        "$(VENV)/bin/pytest -m system --durations=30 $(PYTEST_ARGS)",
    ]
