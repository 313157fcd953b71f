"""The comparison page's "Why?" part (reports/diagnosis.py): what traced diagnostic runs
found, fed the parses of real captured traces (benchmarks/rcutrace/fixtures: the demo's
base and the base plus its one-more-jiffy patch), who sees the button that asks for them
and what it does, the traced runs kept out of the verdict's runs table, and the trace
download."""

import copy
import html as html_text
import json
import re
from pathlib import Path

import pytest
from django.core.cache import caches
from django.urls import reverse
from django.utils import timezone

from tests.support.factories import (
    ComparisonFactory,
    MeasurementFactory,
    MembershipFactory,
    RunFactory,
    UserFactory,
)
from webapp.comparisons.diagnosis import Diagnosis
from webapp.comparisons.diagnosis import diagnosis as read_diagnosis
from webapp.comparisons.models import Comparison, Run
from webapp.reports import diagnosis as why
from webapp.reports import figures
from webapp.reports.tests.conftest import (
    RUNS_PER_SIDE,
    assert_only_members_see,
    restricted_comparison,
    writer_samples,
)
from webapp.trees.models import TreeMembership

pytestmark = pytest.mark.django_db

# Read as files: the report imports no benchmark module but the registry (import contract).
FIXTURES = Path(__file__).resolve().parents[3] / "benchmarks" / "rcutrace" / "fixtures"
BASE = json.loads((FIXTURES / "x86_64-pc-tcg.trace.json").read_text())
PATCHED = json.loads((FIXTURES / "x86_64-pc-tcg-demo.trace.json").read_text())
USABLE = 5  # usable traced runs per side; each side has one more that is not
# Three events of a dump as the console had them (a LOST line between), and what the
# download makes of them: ftrace's own text form, as /sys/kernel/tracing/trace prints it.
DUMP = (
    "[    3.062103] rcu_pree-16        2d..1. 1061092us : rcu_grace_period: rcu_preempt 1413 "
    "start\n"
    "[    3.062103] CPU:1 [LOST 12 EVENTS]\n"
    "[    3.062215] rcu_pree-16        2d..1. 1061101us : rcu_grace_period: rcu_preempt 1413 "
    "fqswait\n"
)
TRACE_TXT = (
    "# tracer: nop\n#\n"
    "#           TASK-PID     CPU#  ||||   TIMESTAMP  FUNCTION\n"
    "#              | |         |   ||||      |         |\n"
    "        rcu_pree-16      [002] d..1     1.061092: rcu_grace_period: rcu_preempt 1413 start\n"
    "CPU:1 [LOST 12 EVENTS]\n"
    "        rcu_pree-16      [002] d..1     1.061101: rcu_grace_period: rcu_preempt 1413 fqswait\n"
)


def _digest(side: str, k: int) -> dict:
    """Traced run k of a side: the real parse, its phases spread a little run to run; the
    init phase spread alike on both sides (no change), the holdout share by side."""
    d = copy.deepcopy(BASE if side == "A" else PATCHED)
    s = d["summary"]
    for phase in ("gp_duration", "gp_first_fqs_wait", "gp_after_first_fqs"):
        s[phase] += 0.004 * k
    s["gp_init"] = 0.007 + 0.001 * ((k + (side == "B")) % 3)
    s["holdout_kthread_cpu_share"] = (0.10 if side == "A" else 0.30) + 0.02 * k
    return d


def traced_run(c: Comparison, side: str, digest: dict | None, *, result: str = "ok",
               state: str = "done", samples: list[float] | None = None) -> Run:  # fmt: skip
    last = c.runs.order_by("-order").first()
    done = state == "done"
    run = RunFactory.create(
        comparison=c, side=side, traced=True, order=0 if last is None else last.order + 1,
        index=c.runs.filter(side=side).count(), state=state, result=result if done else "",
        error_code="panic" if result == "failed" else "", trace_summary=digest,
        trace_log="" if digest is None else DUMP, finished_at=timezone.now() if done else None,
    )  # fmt: skip
    if samples:
        MeasurementFactory.create(run=run, samples=samples)
    return run


@pytest.fixture
def diagnosed(done_comparison):
    """done_comparison (sync-rcu-latency, 3 untraced ok runs a side), submitted by `sub`,
    with 6 traced runs a side: 5 usable, whose writer durations are the untraced runs' plus
    10%; A's sixth lost 3.1% of its trace, B's sixth panicked."""
    c = done_comparison
    c.finished_at = timezone.now()
    c.diagnosis_per_side = USABLE + 1
    c.submitted_by = UserFactory.create(username="sub")
    c.save()
    for k in range(USABLE):
        for side in "AB":
            samples = [1.1 * v for v in writer_samples(side, k % RUNS_PER_SIDE)]
            traced_run(c, side, _digest(side, k), samples=samples)
    traced_run(c, "A", dict(_digest("A", USABLE), usable=False, loss=0.031))
    traced_run(c, "B", None, result="failed")
    return c


def _page(client, c) -> str:
    response = client.get(reverse("reports:comparison", args=[c.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _section(html: str) -> str:
    """The "Why?" section, its text unescaped (the template escapes every apostrophe)."""
    start = html.index('<section id="diagnosis">')
    return html_text.unescape(html[start : html.index("\n</section>", start)])


def _phase(section: str, phase: str) -> list[str]:
    """A row of the phase table: its cells' text."""
    row = re.search(rf'<tr class="phase-row[^"]*" data-phase="{phase}".*?</tr>', section, re.S)
    assert row, phase
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                  row.group(0), re.S)]  # fmt: skip


def test_the_why_section_shows_what_the_traced_runs_found(client, diagnosed):
    c = diagnosed
    section = _section(_page(client, c))
    assert "Traced runs, never in a verdict." in section
    assert 'data-running="false"' in section
    assert 'id="diagnosis-progress">12 of 12</span> traced runs finished' in section
    assert "usable traces: A 5, B 5" in section
    # The patch's extra jiffy: the wait before the first scan, and so the grace period.
    label, unit, used, a, b, shift, ci, q, mark = _phase(section, "gp_first_fqs_wait")
    assert (label, unit, used, a, b, shift, mark) == (
        "wait before the first FQS scan", "ms", "5/5", "3.995", "4.992", "+0.997", "flagged"
    )  # fmt: skip
    bounds = re.fullmatch(r"\[(\S+), (\S+)\]", ci)
    assert bounds, ci
    low, high = (float(x) for x in bounds.groups())
    assert 0 < low <= 0.997 <= high
    assert float(q) <= 0.05
    assert _phase(section, "gp_duration")[-1] == "flagged"
    assert 'data-phase="gp_init" data-flagged="false"' in section  # spread alike: no change
    # A share is shown in percent, its shift in percentage points.
    assert _phase(section, "holdout_kthread_cpu_share")[1:6] == ["%", "5/5", "14.0", "34.0",
                                                                 "+20.0"]  # fmt: skip
    # (4.992 - 3.995) / (5.036 - 4.053): the wait is 101% of the grace period's change.
    assert re.search(r"The wait before the first FQS scan accounts for 101% \[\d+%, \d+%\] of "
                     r"the change in median grace period duration", section)  # fmt: skip
    assert "the grace-period kthread's own CPU: A 14%, B 34%" in section
    assert ("A: writer_duration p50 traced 6.7595 ms against untraced 6.145 ms, +10.0% "
            "(medians of 5 traced and 3 untraced runs' p50)") in section  # fmt: skip
    assert "B: writer_duration p50 traced 7.4195 ms against untraced 6.745 ms, +10.0%" in section
    assert section.count("Plotly.newPlot") == 2  # the stacked phases, the scan histogram
    # The traced runs, each with its trace but the one that panicked before dumping it.
    runs = re.findall(r'<tr class="traced-run" data-run="(\d+)" data-usable="(\w+)"', section)
    assert len(runs) == 12
    assert sum(u == "true" for _, u in runs) == 10
    assert "its trace lost 3.1% of its events or grace periods (more than 1%)" in section
    assert "the run failed: panic" in section
    failed = c.runs.get(traced=True, result="failed")
    links = re.findall(r'href="/runs/(\d+)/trace.txt"', section)
    assert sorted(map(int, links)) == sorted(int(pk) for pk, _ in runs if int(pk) != failed.pk)
    assert 'id="diagnose"' not in section  # asked for already
    assert 'id="stop-diagnosis"' not in section  # nothing left to stop


def test_the_verdicts_runs_table_leaves_traced_runs_out_and_their_pages_say_so(client, diagnosed):
    c = diagnosed
    html = _page(client, c)
    body = html[: html.index('<section id="diagnosis">')]
    shown = {int(pk) for pk in re.findall(r'<tr id="run-(\d+)"', body)}
    assert shown == set(c.runs.filter(traced=False).values_list("pk", flat=True))
    assert len(shown) == 2 * RUNS_PER_SIDE + 1
    run = c.runs.filter(traced=True, result="ok").first()
    page = client.get(reverse("reports:run", args=[run.pk])).content.decode()
    assert 'id="traced-mark">traced</span>' in page
    assert "A traced diagnostic run" in page
    assert "Its measurements are data." not in page
    assert f'href="/runs/{run.pk}/trace.txt" id="trace-download"' in page
    untraced = c.runs.filter(traced=False, result="ok").first()
    page = client.get(reverse("reports:run", args=[untraced.pk])).content.decode()
    assert "Its measurements are data." in page
    assert 'id="trace-download"' not in page
    assert 'id="traced-mark"' not in page


def test_a_runs_trace_downloads_in_ftraces_text_form(client, diagnosed):
    run = diagnosed.runs.filter(traced=True, result="ok").first()
    response = client.get(f"/runs/{run.pk}/trace.txt")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="rcubench-run{run.pk}-trace.txt"'
    )
    assert response.content.decode() == TRACE_TXT
    # A run without a trace (it panicked first; or any verdict run) has none to download.
    for none in (diagnosed.runs.get(traced=True, result="failed"),
                 diagnosed.runs.filter(traced=False).first()):  # fmt: skip
        assert client.get(f"/runs/{none.pk}/trace.txt").status_code == 404


def test_a_restricted_comparisons_traces_are_its_members_only(client):
    c = restricted_comparison(state="done", result="ok", diagnosis_per_side=1)
    run = traced_run(c, "A", _digest("A", 0))
    assert_only_members_see(client, c, f"/runs/{run.pk}/trace.txt")


def test_a_running_diagnosis_says_so_and_its_submitter_may_stop_it(client, diagnosed):
    c = diagnosed
    Run.objects.filter(pk__in=[r.pk for r in c.runs.filter(traced=True, result="ok")[:2]]).update(
        state="queued", result="", finished_at=None
    )
    section = _section(_page(client, c))
    assert 'data-running="true"' in section
    assert 'id="diagnosis-progress">10 of 12</span>' in section
    assert 'id="stop-diagnosis"' not in section  # anonymous
    client.force_login(c.submitted_by)
    section = _section(_page(client, c))
    assert 'id="stop-diagnosis"' in section
    response = client.post(reverse("reports:comparison-cancel", args=[c.pk]))
    assert response.status_code == 302
    c.refresh_from_db()
    assert (c.state, c.result, c.verdict) == ("done", "ok", "regression")
    assert c.runs.filter(traced=True, error_code="cancelled").count() == 2
    section = _section(_page(client, c))
    assert 'data-running="false"' in section
    assert 'id="stop-diagnosis"' not in section


def test_a_running_diagnosis_polls_its_status_line_and_reloads_the_page_when_done(
    client, diagnosed
):
    c = diagnosed
    waiting = list(c.runs.filter(traced=True, result="ok").values_list("pk", flat=True)[:2])
    Run.objects.filter(pk__in=waiting).update(state="queued", result="", finished_at=None)
    live = reverse("reports:comparison-diagnosis-live", args=[c.pk])
    section = _section(_page(client, c))
    assert f'hx-get="{live}"' in section
    response = client.get(live, headers={"HX-Request": "true"})
    assert response.status_code == 200
    line = response.content.decode()
    assert 'id="diagnosis-progress">10 of 12</span>' in line
    assert f'hx-get="{live}"' in line  # polls on
    Run.objects.filter(pk__in=waiting).update(state="done", result="ok", finished_at=timezone.now())
    response = client.get(live, headers={"HX-Request": "true"})
    assert response.headers["HX-Refresh"] == "true"  # the whole section, figures and all
    assert f'hx-get="{live}"' not in _section(_page(client, c))
    assert 'id="diagnosis-progress">12 of 12</span>' in client.get(live).content.decode()


def test_the_status_line_of_a_comparison_they_may_not_see_is_404(client):
    c = restricted_comparison(state="done", result="ok", diagnosis_per_side=1)
    traced_run(c, "A", _digest("A", 0), state="queued")
    assert_only_members_see(client, c, reverse("reports:comparison-diagnosis-live", args=[c.pk]))


def test_a_finished_diagnosis_is_computed_once_until_a_traced_run_ends_again(
    client, diagnosed, monkeypatch
):
    calls: list[int] = []

    def counting(c: Comparison) -> Diagnosis | None:
        calls.append(c.pk)
        return read_diagnosis(c)

    monkeypatch.setattr(why, "read_diagnosis", counting)
    first = _section(_page(client, diagnosed))
    assert _section(_page(client, diagnosed)) == first
    assert len(calls) == 1
    traced_run(diagnosed, "B", _digest("B", 9))  # one more traced run ended
    assert "13 of 13" in _section(_page(client, diagnosed))
    assert len(calls) == 2
    # While one runs, it is read at each request (and never stored).
    traced_run(diagnosed, "A", None, state="queued")
    caches["reports"].clear()
    _page(client, diagnosed)
    _page(client, diagnosed)
    assert len(calls) == 4


# --- asking for it ---------------------------------------------------------------------


@pytest.fixture
def people(done_comparison):
    """done_comparison's submitter, an admin and a plain member of its (public) tree."""
    c = done_comparison
    tree = c.revision_a.tree
    c.submitted_by = MembershipFactory.create(tree=tree).user
    c.save()
    admin = MembershipFactory.create(tree=tree, role=TreeMembership.Role.ADMIN).user
    member = MembershipFactory.create(tree=tree).user
    staff = UserFactory.create(username="operator", is_staff=True)
    return {"sub": c.submitted_by, "admin": admin, "staff": staff, "member": member}


BUTTON = "Trace both kernels (5 diagnostic runs per side)"


@pytest.mark.parametrize("who", ["sub", "admin", "staff"])
def test_who_may_cancel_is_offered_the_button_and_it_schedules_the_traced_runs(
    client, done_comparison, people, settings, who
):
    settings.RCUBENCH_DIAGNOSIS_RUNS = 5
    c = done_comparison
    client.force_login(people[who])
    section = _section(_page(client, c))
    assert BUTTON in section
    assert f'action="{reverse("reports:comparison-diagnose", args=[c.pk])}"' in section
    response = client.post(reverse("reports:comparison-diagnose", args=[c.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:comparison", args=[c.pk]) + "#diagnosis"
    c.refresh_from_db()
    assert c.diagnosis_per_side == 5
    traced = c.runs.filter(traced=True)
    assert sorted(traced.values_list("side", flat=True)) == ["A"] * 5 + ["B"] * 5
    assert set(traced.values_list("state", flat=True)) == {"queued"}
    html = _page(client, c)
    assert "10 traced diagnostic runs queued; they never enter a verdict." in html
    section = _section(html)
    assert 'id="diagnosis-progress">0 of 10</span>' in section
    assert BUTTON not in section
    assert "No phase table yet: the traced runs are still running." in section
    # Asked twice: the reason, and nothing more scheduled.
    client.post(reverse("reports:comparison-diagnose", args=[c.pk]))
    html = _page(client, c)
    assert (f"Not traced: comparison {c.pk} has its diagnostic runs already (5 per side)"
            in html)  # fmt: skip
    assert c.runs.filter(traced=True).count() == 10


def test_others_see_no_button_and_get_403(client, done_comparison, people):
    c = done_comparison
    url = reverse("reports:comparison-diagnose", args=[c.pk])
    for user in (None, people["member"], UserFactory.create(username="outsider")):
        if user is not None:
            client.force_login(user)
        assert 'id="diagnosis"' not in _page(client, c)
        assert client.post(url).status_code == 403  # public: they see it, may not trace it
    assert client.get(url).status_code == 405
    assert not c.runs.filter(traced=True).exists()


def test_a_comparison_they_may_not_see_is_404(client):
    c = restricted_comparison(state="done", result="ok", benchmarks=["sync-rcu-latency"])
    url = reverse("reports:comparison-diagnose", args=[c.pk])
    assert client.post(url).status_code == 404
    client.force_login(UserFactory.create(username="outsider"))
    assert client.post(url).status_code == 404
    assert not c.runs.exists()


@pytest.mark.parametrize(
    ("benchmarks", "result", "error_code"),
    [(["boot-time"], "ok", ""), (["sync-rcu-latency"], "failed", "runs-failed")],
)
def test_nothing_is_offered_where_nothing_can_be_traced(client, benchmarks, result, error_code):
    c = ComparisonFactory.create(benchmarks=benchmarks, state="done", result=result,
                                 error_code=error_code)  # fmt: skip
    client.force_login(UserFactory.create(username="operator", is_staff=True))
    assert 'id="diagnosis"' not in _page(client, c)
    # Posted all the same: the orchestrator's reason, and nothing scheduled.
    client.post(reverse("reports:comparison-diagnose", args=[c.pk]))
    assert "Not traced: " in _page(client, c)
    assert not c.runs.filter(traced=True).exists()


# --- the figures (pure) ----------------------------------------------------------------


def test_the_phase_bars_stack_each_sides_medians_and_mark_the_whole():
    medians = {"A": {"gp_init": 0.007, "gp_first_fqs_wait": 3.99, "gp_after_first_fqs": 0.015,
                     "gp_duration": 4.01},
               "B": {"gp_init": 0.011, "gp_first_fqs_wait": 5.048, "gp_after_first_fqs": 0.022,
                     "gp_duration": 5.086}}  # fmt: skip
    phases = [("gp_init", "init"), ("gp_first_fqs_wait", "wait"), ("gp_after_first_fqs", "after")]
    fig = figures.phase_bars_figure("t", "ms", medians, phases, whole="gp_duration")
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["init", "wait", "after"]
    assert [list(t.x) for t in bars] == [[0.007, 0.011], [3.99, 5.048], [0.015, 0.022]]
    assert all(list(t.y) == ["A", "B"] for t in bars)
    (whole,) = (t for t in fig.data if t.type == "scatter")
    assert list(whole.x) == [4.01, 5.086]
    assert fig.layout.barmode == "stack"
    # A side with no usable run has no bar.
    fig = figures.phase_bars_figure("t", "ms", {"A": medians["A"], "B": {}}, phases)
    assert all(list(t.y) == ["A"] for t in fig.data)


def test_the_scan_histogram_compares_shares_of_each_sides_grace_periods():
    fig = figures.scan_histogram_figure("t", {"A": {0: 1, 1: 800, 2: 6}, "B": {1: 807, 2: 1}})
    a, b = fig.data
    assert list(a.x) == list(b.x) == [0, 1, 2]
    assert (list(a.customdata), list(b.customdata)) == ([1, 800, 6], [0, 807, 1])
    assert list(b.y) == pytest.approx([0, 807 / 808, 1 / 808])
    assert (a.name, b.name) == ("A: 807 grace periods", "B: 808 grace periods")
    assert len(figures.scan_histogram_figure("t", {"A": {}, "B": {1: 3}}).data) == 1
