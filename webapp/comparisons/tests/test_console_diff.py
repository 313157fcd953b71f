"""Console differences: each run's complaints stored when it ends (through the run service,
from real consoles of a planted WARN_ON_ONCE and of its base), and the comparison's
differences as the report, the API's summary and the read model give them."""

from pathlib import Path

import pytest

from benchmarks.registry import get
from engine.run.console import RunOutcome
from tests.support.factories import ComparisonFactory, RunFactory, UserFactory
from webapp.comparisons import exports, runs
from webapp.comparisons.console_diff import console_differences
from webapp.comparisons.models import Comparison, Run
from webapp.states import Result, State

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[3] / "engine" / "run" / "tests" / "fixtures"
WARN = (FIXTURES / "x86_64-warn-once.log").read_bytes().decode("utf-8", "surrogateescape")
BASE = (FIXTURES / "x86_64-base.log").read_bytes().decode("utf-8", "surrogateescape")
SIGNATURE = "WARNING at kernel/rcu/tree.c synchronize_rcu"
SYNC = get("sync-rcu-latency")


def _ended(c: Comparison, side: str, console: str, **kw: object) -> Run:
    """A run of `c` ended by the run service, as a worker ends it."""
    run = RunFactory.create(comparison=c, side=side, state=State.RUNNING, **kw)
    out = RunOutcome("ok", "powered off", console, wall_seconds=4.0, ready_seconds=1.0)
    assert runs.record_outcome(run, SYNC, out) is not None
    run.refresh_from_db()
    return run


def _comparison(a: list[str], b: list[str]) -> Comparison:
    c = ComparisonFactory.create(state="done", result="ok", verdict="no-meaningful-change")
    for console in a:
        _ended(c, "A", console)
    for console in b:
        _ended(c, "B", console)
    return c


def test_a_run_stores_its_complaints_when_it_ends():
    c = ComparisonFactory.create()
    run = _ended(c, "B", WARN)
    assert run.result == Result.OK
    assert run.console_signatures is not None
    assert run.console_signatures["found"][0][:2] == [SIGNATURE, 1]
    assert _ended(c, "A", BASE).console_signatures == {"found": [], "truncated": False}


def test_a_warning_in_every_b_run_and_no_a_run_is_a_finding_with_its_counts():
    (d,) = console_differences(_comparison([BASE] * 3, [WARN] * 4))
    assert (d.benchmark, d.signature, d.side) == ("sync-rcu-latency", SIGNATURE, "B")
    assert (d.runs, d.scanned, d.other_scanned, d.occurrences) == (4, 4, 3, 4)
    assert d.finding
    assert d.example.startswith("WARNING: CPU: ")
    assert d.text == f"{SIGNATURE}: in 4 of 4 B runs, none of 3 A runs"


def test_an_a_a_lists_no_difference():
    assert console_differences(_comparison([BASE] * 3, [BASE] * 3)) == []
    assert console_differences(_comparison([WARN] * 2, [WARN] * 3)) == []


def test_a_warning_in_one_run_of_four_is_listed_but_no_finding_and_one_gone_is_on_a():
    (d,) = console_differences(_comparison([BASE] * 2, [WARN] + [BASE] * 3))
    assert (d.side, d.runs, d.scanned, d.finding) == ("B", 1, 4, False)
    (gone,) = console_differences(_comparison([WARN] * 2, [BASE] * 2))
    assert (gone.side, gone.runs, gone.finding, gone.other) == ("A", 2, True, "B")


def test_traced_host_failed_and_unfinished_runs_are_not_counted():
    c = _comparison([BASE], [BASE])
    _ended(c, "B", WARN, traced=True)  # a diagnostic run boots another command line
    RunFactory.create(comparison=c, side="B", state=State.DONE, result=Result.INCOMPLETE,
                      error_code=Run.Error.INFRA, console_log=WARN)  # fmt: skip
    RunFactory.create(comparison=c, side="B", console_log=WARN)  # queued
    assert console_differences(c) == []


def test_an_older_run_without_a_stored_scan_is_scanned_from_its_kept_console():
    c = _comparison([BASE], [])
    RunFactory.create(comparison=c, side="B", state=State.DONE, result=Result.OK,
                      console_log=WARN, console_signatures=None)  # fmt: skip
    (d,) = console_differences(c)
    assert (d.side, d.runs, d.scanned) == ("B", 1, 1)


def test_the_api_summary_and_the_report_show_the_difference(client):
    c = _comparison([BASE] * 2, [WARN] * 2)
    (row,) = exports.summary(c)["console_differences"]
    assert row == {
        "benchmark": "sync-rcu-latency", "signature": SIGNATURE, "side": "B", "runs": 2,
        "scanned": 2, "other_scanned": 2, "occurrences": 2,
        "example": console_differences(c)[0].example, "finding": True,
    }  # fmt: skip
    client.force_login(UserFactory.create(is_staff=True))
    page = client.get(f"/comparisons/{c.pk}/").content.decode()
    table = page[page.index('id="console-differences"') :]
    assert SIGNATURE in table
    assert "2 of 2" in table
    assert "new in B" in table
    assert 'data-finding="true"' in table


def test_a_report_without_differences_says_none(client):
    c = _comparison([BASE], [BASE])
    client.force_login(UserFactory.create(is_staff=True))
    page = client.get(f"/comparisons/{c.pk}/").content.decode()
    assert 'id="no-console-differences"' in page
