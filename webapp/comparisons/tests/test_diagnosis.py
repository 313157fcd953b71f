"""Diagnostic runs against the real database: who schedules them (the policy after a
verdict, or a request), that they never touch the verdict, the failure budget or the
history, how a cancel and a lost message treat them, and the read model the report and the
API show them through, fed the parses of real captured traces. Real workers and boots
drive them in test_end_to_end.py."""

import json
from collections import Counter
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from benchmarks.rcutrace import golden
from webapp.analysis.services import counted_runs, failure_counts
from webapp.comparisons import diagnostic_runs, orchestrator
from webapp.comparisons.diagnosis import diagnosis
from webapp.comparisons.diagnostic_runs import DiagnosisRefused
from webapp.comparisons.models import Comparison, Measurement, Run
from webapp.comparisons.summary import run_counts
from webapp.comparisons.tests.test_orchestrator import _finish_run, _running, _samples
from webapp.states import State
from webapp.trees.models import Build

pytestmark = pytest.mark.django_db

# The parses of two real traced runs: the demo's base, and the base + the demo's patch
# (one more jiffy before each FQS scan).
BASE = json.loads((golden.FIXTURES / "x86_64-pc-tcg.trace.json").read_text())
PATCHED = json.loads((golden.FIXTURES / "x86_64-pc-tcg-demo.trace.json").read_text())


@pytest.fixture
def few_runs(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    settings.RCUBENCH_REDISPATCH_SECONDS = 60
    settings.RCUBENCH_DIAGNOSIS_RUNS = 2


def _verdict(slower: float = 1.10, **kw: object) -> Comparison:
    """A comparison run to its verdict: B `slower` times A (1.0: no change)."""
    rng = np.random.default_rng(5)
    c = _running(**kw)
    for _ in range(5):  # looks
        if c.state == "done":
            break
        for run in c.runs.filter(state="queued").order_by("order"):
            _finish_run(run, samples=_samples(rng, 1.0 if run.side == "A" else slower))
        orchestrator.conclude_look(c.pk)
        c.refresh_from_db()
    return c


def test_a_regression_gets_traced_runs_of_both_kernels_after_its_verdict(few_runs, settings):
    settings.RCUBENCH_DIAGNOSE = "changes"
    c = _verdict()
    assert (c.result, c.verdict, c.diagnosis_per_side) == ("ok", "regression", 2)
    traced = list(c.runs.filter(traced=True).order_by("order"))
    assert Counter(r.side for r in traced) == {"A": 2, "B": 2}
    assert traced[0].order > max(r.order for r in c.runs.filter(traced=False))
    assert all(r.state == "queued" and r.benchmark == "sync-rcu-latency" for r in traced)
    # They finish ok with measurements of their own: the verdict and its counts stand.
    verdicts = list(c.verdicts.values_list("metric", "statistic", "p_value", "verdict"))
    counted, counts = counted_runs(c).count(), run_counts(c)
    for run in traced:
        _finish_run(run, samples=_samples(np.random.default_rng(run.pk), 3.0))
    c.refresh_from_db()
    assert (c.state, c.result, c.verdict) == ("done", "ok", "regression")
    assert list(c.verdicts.values_list("metric", "statistic", "p_value", "verdict")) == verdicts
    assert (counted_runs(c).count(), run_counts(c)) == (counted, counts)


def test_no_change_is_not_traced_unless_the_policy_says_all(few_runs, settings):
    settings.RCUBENCH_DIAGNOSE = "changes"
    assert not _verdict(slower=1.0).runs.filter(traced=True).exists()
    settings.RCUBENCH_DIAGNOSE = "all"
    c = _verdict(slower=1.0)
    assert c.verdict == "no-meaningful-change"
    assert c.runs.filter(traced=True).count() == 4


def _untraceable(c: Comparison) -> Comparison:
    """The comparison as if it had measured boot time only (no rcuscale, no dump)."""
    Comparison.objects.filter(pk=c.pk).update(benchmarks=["boot-time"])
    c.refresh_from_db()
    return c


def test_policy_never_bisection_steps_and_untraceable_benchmarks_get_none(few_runs, settings):
    settings.RCUBENCH_DIAGNOSE = "never"
    c = _verdict()
    assert c.diagnosis_per_side == 0
    settings.RCUBENCH_DIAGNOSE = "all"
    assert diagnostic_runs.diagnosed_by_policy(c) == ["sync-rcu-latency"]
    Comparison.objects.filter(pk=c.pk).update(trigger=Comparison.Trigger.BISECTION)
    c.refresh_from_db()
    assert diagnostic_runs.diagnosed_by_policy(c) == []
    assert diagnostic_runs.diagnosed_by_policy(_untraceable(_verdict())) == []


def test_a_requested_diagnosis_is_scheduled_once_and_refusals_name_the_reason(few_runs):
    c = _verdict()
    assert c.diagnosis_per_side == 0  # the suite's policy: never
    with pytest.raises(DiagnosisRefused, match="diagnostic runs per side must be 1 to 400"):
        diagnostic_runs.diagnose(c.pk, 0)
    assert diagnostic_runs.diagnose(c.pk, 3, by="alice") == 6
    c.refresh_from_db()
    assert c.diagnosis_per_side == 3
    with pytest.raises(DiagnosisRefused, match=f"comparison {c.pk} has its diagnostic runs "
                       r"already \(3 per side\)"):  # fmt: skip
        diagnostic_runs.diagnose(c.pk)
    running = _running()
    with pytest.raises(DiagnosisRefused, match=r"has not ended ok \(running\)"):
        diagnostic_runs.diagnose(running.pk)
    boot = _untraceable(_verdict())
    with pytest.raises(DiagnosisRefused, match=r"benchmarks \(boot-time\) can be traced"):
        diagnostic_runs.diagnose(boot.pk)
    assert not boot.runs.filter(traced=True).exists()


def test_traced_runs_the_kernel_failed_are_not_replaced_nor_counted_as_failures(few_runs):
    c = _verdict()
    diagnostic_runs.diagnose(c.pk)
    before = failure_counts(c)
    for run in c.runs.filter(traced=True):
        _finish_run(run, "failed", "panic")
    assert c.runs.filter(traced=True).count() == 4  # the kernel's answer under tracing
    assert failure_counts(c) == before
    c.refresh_from_db()
    assert (c.state, c.result) == ("done", "ok")


def test_traced_runs_the_host_failed_run_again_within_a_budget_per_side(
    few_runs, django_capture_on_commit_callbacks
):
    c = _verdict()
    diagnostic_runs.diagnose(c.pk)
    before = failure_counts(c)
    first = c.runs.filter(traced=True, side="A").order_by("order").first()
    assert first is not None
    with django_capture_on_commit_callbacks() as sent:
        _finish_run(first, "incomplete", "infra-error")
    again = Run.objects.get(retry_of=first)
    assert (again.traced, again.side, again.state) == (True, "A", "queued")
    assert len(sent) == 1  # its message
    orchestrator.advance(c.pk)  # a second advance does not replace it twice
    assert Run.objects.filter(retry_of=first).count() == 1
    # Side A may be run again twice (2 per side); a third host failure stays as it is.
    _finish_run(again, "incomplete", "lost")
    third = Run.objects.get(retry_of=again)
    _finish_run(third, "incomplete", "infra-error")
    assert not Run.objects.filter(retry_of=third).exists()
    assert failure_counts(c) == before
    c.refresh_from_db()
    d = diagnosis(c)
    assert d is not None
    why = {r.id: r.why_not for r in d.benchmarks[0].runs}
    assert why[first.pk] == f"the run incomplete: infra-error, run again as run {again.pk}"
    assert why[third.pk] == "the run incomplete: infra-error"
    assert d.benchmarks[0].runs[-1].id == third.pk


def test_the_kick_replaces_a_traced_run_the_reaper_ended(few_runs):
    c = _verdict()
    diagnostic_runs.diagnose(c.pk)
    first = c.runs.filter(traced=True).order_by("order").first()
    assert first is not None
    ended = {"state": State.DONE, "result": "incomplete", "error_code": "lost"}
    Run.objects.filter(pk=first.pk).update(**ended, finished_at=timezone.now())
    assert orchestrator.advance_unfinished() == 1
    assert Run.objects.filter(retry_of=first, traced=True).exists()


def test_cancel_ends_a_done_comparisons_traced_runs_and_only_those(few_runs):
    c = _verdict()
    diagnostic_runs.diagnose(c.pk)
    first = c.runs.filter(traced=True).order_by("order").first()
    assert first is not None
    _finish_run(first)
    assert orchestrator.cancel(c.pk, "cancelled by alice on the web page")
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "ok", "")
    ended = c.runs.filter(traced=True, error_code="cancelled")
    assert ended.count() == 3
    assert not orchestrator.cancel(c.pk)  # nothing left to end


def test_lost_traced_runs_are_sent_again_and_their_kernels_kept(
    few_runs, django_capture_on_commit_callbacks
):
    c = _verdict()
    diagnostic_runs.diagnose(c.pk)
    Comparison.objects.exclude(pk=c.pk).delete()
    keys = {"a-key", "b-key"}
    assert c.build_a_id is not None
    assert c.build_b_id is not None
    Build.objects.filter(pk=c.build_a_id).update(artifact_key="a-key")
    Build.objects.filter(pk=c.build_b_id).update(artifact_key="b-key")
    assert orchestrator.artifacts_in_use() == keys  # done, but its traced runs boot them
    old = timezone.now() - timedelta(seconds=61)
    c.runs.filter(traced=True).update(dispatched_at=old)
    with django_capture_on_commit_callbacks() as sent:
        orchestrator.advance_unfinished()
    assert len(sent) == 4
    for run in c.runs.filter(traced=True):
        _finish_run(run)
    assert orchestrator.artifacts_in_use() == frozenset()


def _traced(c: Comparison, side: str, digest: dict | None, result: str = "ok") -> Run:
    last = c.runs.order_by("-order").first()
    order = 0 if last is None else last.order + 1
    run = Run.objects.create(
        comparison=c, benchmark="sync-rcu-latency", side=side, traced=True, order=order,
        index=c.runs.filter(side=side).count(), state=State.DONE, result=result,
        error_code="" if result == "ok" else "panic", trace_summary=digest,
    )  # fmt: skip
    return run


def test_the_read_model_compares_the_phases_of_real_traces(few_runs):
    c = _verdict()
    Comparison.objects.filter(pk=c.pk).update(diagnosis_per_side=6)
    c.refresh_from_db()
    # Five a side: with fewer, no relabelling test can reach 0.05 (3 v 3: p >= 0.1).
    for side, digest in (("A", BASE), ("B", PATCHED)):
        for _ in range(5):
            run = _traced(c, side, digest)
            # Tracing slows the primary down by a tenth: the perturbation line says so.
            untraced = Measurement.objects.filter(
                run__comparison=c, run__side=side, run__traced=False, metric="writer_duration"
            ).first()
            assert untraced is not None
            Measurement.objects.create(run=run, benchmark="sync-rcu-latency",
                                       metric="writer_duration", unit="ms",
                                       samples=[v * 1.1 for v in untraced.samples])  # fmt: skip
    lossy = dict(BASE, usable=False, loss=0.031)
    _traced(c, "A", lossy)
    _traced(c, "B", None, result="failed")
    d = diagnosis(c)
    assert d is not None
    assert not d.running
    (bench,) = d.benchmarks
    assert bench.usable == {"A": 5, "B": 5}
    why = {r.why_not for r in bench.runs if not r.usable}
    assert why == {"its trace lost 3.1% of its events or grace periods (more than 1%)",
                   "the run failed: panic"}  # fmt: skip
    rows = {r.phase: r for r in bench.rows}
    # The patch's extra jiffy (1 ms at HZ=1000) is all in the wait before the first scan.
    wait = rows["gp_first_fqs_wait"]
    assert wait.flagged
    assert wait.shift == pytest.approx(
        PATCHED["summary"]["gp_first_fqs_wait"] - BASE["summary"]["gp_first_fqs_wait"]
    )
    assert rows["gp_duration"].flagged
    assert bench.share is not None
    assert 0.95 <= bench.share.estimate <= 1.05
    assert bench.fqs_scans == {
        "A": {int(k): 5 * n for k, n in BASE["fqs_scans"].items()},
        "B": {int(k): 5 * n for k, n in PATCHED["fqs_scans"].items()},
    }
    assert bench.medians["B"]["gp_first_fqs_wait"] == PATCHED["summary"]["gp_first_fqs_wait"]
    for p in bench.perturbation:
        assert p.traced_runs == 5
        assert p.change == pytest.approx(0.1, abs=0.02)


def test_no_diagnosis_reads_as_none_and_a_running_one_says_so(few_runs):
    c = _verdict()
    assert diagnosis(c) is None
    diagnostic_runs.diagnose(c.pk)
    c.refresh_from_db()
    d = diagnosis(c)
    assert d is not None
    assert (d.running, d.unfinished) == (True, 4)
    (bench,) = d.benchmarks
    assert (bench.rows, bench.share) == ((), None)
    assert {r.why_not for r in bench.runs} == {"not finished"}
