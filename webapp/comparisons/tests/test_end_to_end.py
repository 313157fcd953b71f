"""Whole comparisons through real workers: Celery on the real Redis, builds from the
session's cache, real boots under libvirt/QEMU, the engine, the report page. And the
faults the orchestrator must survive: a worker SIGKILLed mid-run, a VM that hangs, Redis
restarted mid-comparison, a build that fails, a cancel while a VM runs.

Few runs per side (RCUBENCH_ALLOW_FEW_RUNS, a test-only override): the 24-run statistics
belong to `make demo` and perf/, not to CI. The comparison from the command line is the
session's shared one (conftest.shared_comparison), which test_verdicts_end_to_end.py reads
too; each fault has a comparison of its own, of 2 runs a side (the floor of test mode).
"""

import io
import json
import os
import signal
import subprocess
import time
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.test import Client

from conftest import BASE_TAG, DEFAULT_TREE, TEST_BROKER_URL
from webapp.comparisons.diagnosis import diagnosis
from webapp.comparisons.models import Comparison, Run
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.comparisons.tests.conftest import (
    DEMO_MBOX,
    SHARED_CMDLINE_B,
    SHARED_RUNS,
    SharedComparison,
    rcubench_domains,
    state_lines,
)
from webapp.trees.models import Revision
from webapp.trees.services import register_local_tree, store_series

pytestmark = pytest.mark.django_db(transaction=True)

ABBA = {tuple("ABBA"), tuple("BAAB")}


def _submit(runs: int = 2, **kw: object) -> Comparison:
    fields: dict[str, object] = {
        "tree": register_local_tree(DEFAULT_TREE).name,
        "base_ref": BASE_TAG,
        "benchmarks": ("sync-rcu-latency",),
        "target": "qemu-x86_64",
        "min_runs": runs,
        "max_runs": runs,
    }
    return submit_comparison(ComparisonRequest(**{**fields, **kw}))  # type: ignore[arg-type]


def _running_run(c: Comparison, procs, **filters: object) -> Run:
    def one() -> Run | None:
        return c.runs.filter(state="running", **filters).first()

    return procs.wait_for(one, 300)


def _assert_counted(c: Comparison, per_side: int) -> None:
    """`per_side` ok runs a side, plus the ok partners of replacements (a failed run is
    replaced in a fresh pair with a run of the other side: one with no retry_of beyond the
    schedule's slots): none lost, none counted twice."""
    runs = list(c.runs.order_by("order"))
    ok = [r for r in runs if r.result == "ok"]
    partners = [r for r in ok if r.retry_of_id is None and r.index >= per_side]
    for side in "AB":
        assert sum(r.side == side for r in ok) == per_side + sum(r.side == side for r in partners)
    orders = [r.order for r in runs]
    assert len(orders) == len(set(orders))
    assert all(r.measurements.filter(metric="writer_duration").count() == 1 for r in ok)


def _states(lines: list[dict], kind: str, pk: int | None) -> list[str]:
    return [
        line["state"] for line in lines if line["event"] == f"{kind} state" and line.get(kind) == pk
    ]


def test_a_comparison_from_the_cli_to_the_report(
    cli_comparison: Comparison, shared_comparison: SharedComparison
):
    # `compare --runs 4 --max-runs 4 --cmdline-b rcutree.jiffies_till_first_fqs=2` with a
    # worker up, run by the shared fixture: `text` is what it printed.
    c, text = cli_comparison, shared_comparison.output
    assert shared_comparison.pks == [c.pk], text  # the command made one comparison
    assert (c.state, c.result, c.error_code) == ("done", "ok", ""), shared_comparison.logs
    # One build serves both sides (same sha, two command lines), from the session's cache.
    assert c.build_a_id == c.build_b_id
    assert c.build_a is not None
    assert c.build_a.cached
    runs = list(c.runs.order_by("order"))
    assert [r.order for r in runs] == list(range(2 * SHARED_RUNS))
    assert {tuple(r.side for r in runs[i : i + 4]) for i in (0, 4)} <= ABBA
    _assert_counted(c, SHARED_RUNS)
    for run in runs:  # the per-side command line reached that side's kernel only
        assert (SHARED_CMDLINE_B in run.console_log) == (run.side == "B")
    primary = c.verdicts.get(benchmark="sync-rcu-latency", metric="writer_duration",
                             statistic="p50")  # fmt: skip
    assert (primary.n_a, primary.n_b, primary.is_primary) == (SHARED_RUNS, SHARED_RUNS, True)
    assert c.verdict == primary.verdict or c.verdict
    # The terminal: the verdict table and the report URL.
    assert "sync-rcu-latency/writer_duration *" in text
    assert f"report: http://127.0.0.1:8000/comparisons/{c.pk}/" in text
    # What the change cost, from the engine's rows of these boots: rcuscale's guards.
    assert "sync-rcu-latency guards: calls " in " ".join(text.split())
    # The report page and its links.
    page = Client().get(f"/comparisons/{c.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "writer_duration" in html
    assert primary.verdict in html
    assert 'id="guards"' in html
    assert "calls per GP" in html
    assert f"/runs/{runs[0].pk}/console" in html
    console = Client().get(f"/runs/{runs[0].pk}/console")
    assert "rcu-scale: writer 0 gps:" in console.content.decode()
    assert not shared_comparison.domains_left
    # Operators' logs: one line per state change of the comparison, its build and each run,
    # with its id (JSON lines in the worker's log; the submission's in this process).
    lines = shared_comparison.states
    assert _states(lines, "comparison", c.pk) == [
        "queued",
        "building",
        "running",
        "analysing",
        "done",
    ]
    assert _states(lines, "build", c.build_a_id) == ["queued", "running", "done"]
    for run in runs:
        assert _states(lines, "run", run.pk) == ["queued", "running", "done"], run


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(celery_processes, env, caplog):
    worker = celery_processes.start_worker(**env)
    c = _submit()
    killed = _running_run(c, celery_processes)
    time.sleep(1.0)  # the VM is booting
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert any(f"run{killed.pk}-" in name for name in rcubench_domains())  # left running
    # The restarted worker destroys the leftover VM; beat's reaper ends the silent run.
    celery_processes.start_worker(**env)
    celery_processes.start_beat(**env)
    celery_processes.until_done(c)
    assert (c.result, c.error_code) == ("ok", ""), c.error_message
    killed.refresh_from_db()
    assert (killed.result, killed.error_code) == ("incomplete", "lost")
    reaped = [
        line
        for line in state_lines(caplog.records, celery_processes)
        if line.get("run") == killed.pk
    ]
    assert [(line["state"], line.get("error")) for line in reaped] == [
        ("queued", None),
        ("running", None),
        ("done", "lost"),
    ]
    assert killed.retried_by.result == "ok"
    _assert_counted(c, 2)
    assert not rcubench_domains()


HOUR_LONG = "rcuscale.minruntime=3600"  # rcuscale keeps writing for at least an hour


def test_a_hung_vm_is_timed_out_and_replaced(celery_processes, env):
    celery_processes.start_worker(**env)
    c = _submit()
    # A guest that runs its test for an hour: hung. Written to the row, as a submission may
    # not set rcuscale.* (the allow-list); the benchmark's own parameters still come last.
    Comparison.objects.filter(pk=c.pk).update(cmdline_b=HOUR_LONG)
    hung = _running_run(c, celery_processes, side="B")
    # Transient: the replacement boots with the usual command line.
    Comparison.objects.filter(pk=c.pk).update(cmdline_b="")
    celery_processes.until_done(c)
    assert (c.result, c.error_code) == ("ok", ""), c.error_message
    hung.refresh_from_db()
    assert (hung.result, hung.error_code) == ("failed", "timeout")
    assert "still running after" in hung.error_message
    assert hung.retried_by.result == "ok"
    _assert_counted(c, 2)
    assert not rcubench_domains()


def _restart_redis() -> None:
    """Redis on 127.0.0.1:6379 shut down and started again as setup.sh starts it: with the
    machine's password (the test broker's), given on stdin, never in the process list."""
    password = urlsplit(TEST_BROKER_URL).password or ""
    auth = {**os.environ, "REDISCLI_AUTH": password} if password else None
    subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave"],
                   env=auth, check=False, capture_output=True)  # fmt: skip
    subprocess.run(
        ["redis-server", "-", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port",
         "6379", "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
         "--logfile", "/var/log/redis/rcubench.log"],
        input=f'requirepass "{password}"\n' if password else "", text=True, check=True,
        capture_output=True,
    )  # fmt: skip
    for _ in range(40):
        ping = subprocess.run(["redis-cli", "-h", "127.0.0.1", "ping"], env=auth,
                              capture_output=True)  # fmt: skip
        if ping.stdout.strip() == b"PONG":
            return
        time.sleep(0.25)
    pytest.fail("Redis did not come back")


def test_redis_restarted_mid_comparison_loses_nothing(celery_processes, env):
    celery_processes.start_worker(**env)
    celery_processes.start_beat(**env)
    c = _submit()
    _running_run(c, celery_processes)
    queued_before = c.runs.filter(state="queued").count()
    assert queued_before  # their messages die with Redis (it keeps nothing on disk)
    _restart_redis()
    celery_processes.until_done(c)
    assert (c.result, c.error_code) == ("ok", ""), c.error_message
    assert not c.runs.exclude(result="ok").exists()  # none lost, none failed
    _assert_counted(c, 2)


def test_a_build_failure_ends_the_comparison_and_the_report_shows_it(celery_processes, env):
    # The demo patch twice: the second copy cannot apply on top of the first. Submission's
    # preflight refuses that at once, so the series is swapped in after it (as a tree that
    # moved between submission and build, or a host with no mirror to check, would let it
    # through); the worker starts after the swap.
    once = DEMO_MBOX.read_bytes()
    twice = once + once.replace(b"demo-v2-1@", b"demo-v2-2@")
    with pytest.raises(SubmissionError, match=r"patch 2 .* does not apply"):
        _submit(series_mbox=twice)
    c = _submit(series_mbox=once)
    Revision.objects.filter(pk=c.revision_b_id).update(series=store_series(twice))
    celery_processes.start_worker(**env)
    celery_processes.until_done(c)
    assert (c.result, c.error_code) == ("failed", "build-failed")
    assert "side B" in c.error_message
    assert "patch-failed" in c.error_message
    assert "patch 2" in c.error_message
    assert not c.runs.exists()
    html = Client().get(f"/comparisons/{c.pk}/").content.decode()
    assert "build-failed" in html
    assert "patch 2" in html


def test_cancel_tears_down_the_running_vm(celery_processes, env):
    celery_processes.start_worker(**env)
    c = _submit()
    Comparison.objects.filter(pk=c.pk).update(cmdline_a=HOUR_LONG, cmdline_b=HOUR_LONG)
    run = _running_run(c, celery_processes)
    celery_processes.wait_for(lambda: any(f"run{run.pk}-" in n for n in rcubench_domains()), 60)
    out = io.StringIO()
    call_command("compare", "--cancel", str(c.pk), stdout=out)
    assert f"comparison {c.pk} cancelled" in out.getvalue()
    celery_processes.wait_for(lambda: not rcubench_domains(), 15)
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "incomplete", "cancelled")
    assert set(c.runs.values_list("error_code", flat=True)) == {"cancelled"}


def test_the_demo_regressions_traced_runs_say_why(celery_processes, env, x86_demo_kernel):
    """Base against base + the demo's patch (one more jiffy before each FQS scan), from the
    session's kernels; the policy traces every verdict here, 5 runs a side (the fewest at
    which a relabelling test can reach 0.05). The traced runs say where the time went."""
    celery_processes.start_worker(**env, RCUBENCH_DIAGNOSE="all", RCUBENCH_DIAGNOSIS_RUNS="5")
    c = _submit(series_mbox=DEMO_MBOX.read_bytes())
    celery_processes.until_done(c, 600)
    assert (c.result, c.error_code) == ("ok", ""), f"{c.error_message}\n{celery_processes.logs()}"
    assert c.diagnosis_per_side == 5
    traced = c.runs.filter(traced=True)
    celery_processes.wait_for(lambda: not traced.exclude(state="done").exists(), 600)
    assert sorted(traced.values_list("side", "result")) == [("A", "ok")] * 5 + [("B", "ok")] * 5
    usable = {"A": 0, "B": 0}
    for run in traced:  # the dump is off the console and parsed; whole, or said not to be
        assert "Dumping ftrace buffer:" in run.trace_log
        assert "Dumping ftrace buffer:" not in run.console_log
        parsed = run.trace_summary or {}
        if parsed["usable"]:
            assert parsed["paired_share"] >= 0.99
            usable[run.side] += 1
        else:  # a loaded host can lose events (a full CI run, 2026-11-28): not used
            assert not parsed["summary"], parsed
    assert sum(usable.values()) >= 9, usable  # at most one of the ten
    # The verdict's runs are the 2 a side it was decided on: no traced run entered it.
    primary = c.verdicts.get(metric="writer_duration", statistic="p50")
    assert (primary.n_a, primary.n_b) == (2, 2)
    d = diagnosis(c)
    assert d is not None
    assert not d.running
    (bench,) = d.benchmarks
    rows = {r.phase: r for r in bench.rows}
    wait = rows["gp_first_fqs_wait"]
    assert wait.flagged, wait
    assert 0.8 <= wait.shift <= 1.2, wait  # a jiffy at HZ=1000: 1 ms
    assert bench.share is not None
    assert bench.share.estimate >= 0.8, bench.share
    for side in "AB":  # rcuscale's ~101 a usable run
        assert sum(bench.fqs_scans[side].values()) >= usable[side] * 100
    # The report's Why? section, and a trace as a viewer opens it.
    html = Client().get(f"/comparisons/{c.pk}/").content.decode()
    assert 'data-phase="gp_first_fqs_wait" data-flagged="true"' in html
    assert f"{bench.benchmark}: grace periods by FQS scans" in html  # the histogram
    trace = Client().get(f"/runs/{traced[0].pk}/trace.txt")
    assert trace.status_code == 200
    assert trace.content.startswith(b"# tracer: nop\n")
    # Operators' logs: the diagnosis's line, and each traced run's queued line says so.
    logged = [json.loads(line) for proc in celery_processes.procs
              for line in proc.log_path.read_text().splitlines()
              if line.startswith("{")]  # fmt: skip
    scheduled = [line for line in logged if line["event"] == "diagnosis scheduled"]
    assert [(x["comparison"], x["runs_per_side"], x["by"]) for x in scheduled] == [
        (c.pk, 5, "policy")]  # fmt: skip
    for run in traced:
        queued = [line for line in state_lines([], celery_processes)
                  if line.get("run") == run.pk and line["state"] == "queued"]  # fmt: skip
        assert [line.get("traced") for line in queued] == [True], queued
