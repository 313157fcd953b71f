"""A sweep through real workers: its points' comparisons released as one cohort, each
point's runs booting its own variant of the benchmark from the session's kernel, the
points' verdicts, the sweep's conclusion and its page. Two points of 2 runs a side (the
floor of test mode): the 24-run scaling statistics are the closing notes' real sweeps."""

import json

import pytest
from django.test import Client

from conftest import BASE_TAG, DEFAULT_TREE
from webapp.comparisons.submission import ComparisonRequest
from webapp.comparisons.tests.conftest import (  # noqa: F401 (fixtures)
    env,
    x86_target,
)
from webapp.sweeps import services
from webapp.sweeps.models import Sweep
from webapp.trees.services import register_local_tree

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_variant_sweep_runs_each_points_variant_in_one_release(celery_processes, env):  # noqa: F811
    celery_processes.start_worker(**env)
    pair = ComparisonRequest(
        tree=register_local_tree(DEFAULT_TREE).name, base_ref=BASE_TAG,
        benchmarks=("sync-rcu-latency",), target="qemu-x86_64", min_runs=2, max_runs=2,
    )  # fmt: skip
    sweep = services.submit_sweep(services.SweepRequest(
        pair=pair, axis="variant", parameter="rcuscale.nwriters", values=("1", "2"),
    ))  # fmt: skip
    points = list(sweep.points.select_related("comparison").order_by("position"))
    for p in points:
        c = celery_processes.until_done(p.comparison, 600)
        assert (c.result, c.error_code) == ("ok", ""), (
            f"{c.error_message}\n{celery_processes.logs()}"
        )
    celery_processes.wait_for(lambda: Sweep.objects.get(pk=sweep.pk).done, 120)
    sweep.refresh_from_db()
    # Each point booted its own variant: the benchmark's name on its runs, rcuscale's
    # parameters as the kernel printed them, and one duration line per call of each writer.
    for p, (name, writers) in zip(
        points, [("sync-rcu-latency", 1), ("sync-rcu-latency--nwriters-2", 2)], strict=True
    ):
        runs = list(p.comparison.runs.filter(traced=False))
        assert {r.benchmark for r in runs} == {name}
        assert len(runs) == 4
        for run in runs:
            assert f" nwriters={writers} " in run.console_log
            gps = run.measurements.get(metric="gps").samples
            durations = run.measurements.get(metric="writer_duration").samples
            assert len(durations) == gps[0] >= 100 * writers
    # One release scheduled both points' runs: no point ran after the other.
    released = [line for line in _log_lines(celery_processes)
                if line.get("event") == "cohort released"
                and line["cohort"] == sweep.cohort]  # fmt: skip
    assert [(sorted(r["comparisons"]), r["runs"]) for r in released] == [
        (sorted(p.comparison_id for p in points), 8)], celery_processes.logs()  # fmt: skip
    # The sweep concluded on both points' runs, with a verdict on the slope of the p50.
    assert sweep.verdict in {"same", "scales-worse", "scales-better", "inconclusive"}, (
        sweep.error_message
    )
    assert (sweep.metric, sweep.statistic) == ("writer_duration", "p50")
    assert [row["benchmark"] for row in sweep.result["points"]] == [
        "sync-rcu-latency", "sync-rcu-latency--nwriters-2"]  # fmt: skip
    assert all(len(row["runs_a"]) == len(row["runs_b"]) == 2 for row in sweep.result["points"])
    html = Client().get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "(sync-rcu-latency--nwriters-2)" in html
    assert sweep.verdict in html


def _log_lines(procs) -> list[dict]:
    """The workers' structured log lines (JSON), in each worker's order."""
    return [json.loads(line) for proc in procs.procs
            for line in proc.log_path.read_text().splitlines() if line.startswith("{")]  # fmt: skip
