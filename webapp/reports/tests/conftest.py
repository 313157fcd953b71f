"""Comparisons in the shapes the report must show: done with verdicts, failed at the build,
still running, and a bpf-slab sweep."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchmarks.registry import BENCHMARKS
from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MeasurementFactory,
    MembershipFactory,
    MetricVerdictFactory,
    PatchSeriesFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.comparisons.models import Comparison

# (metric, statistic, is_primary, verdict) in the order the report must list them: primary
# metrics first, then the engine's SEVERITY order (regression, inconclusive,
# significant-but-small, improvement, no-meaningful-change), then benchmark/metric/statistic.
VERDICTS_IN_REPORT_ORDER = [
    ("writer_duration", "p50", True, "regression"),
    ("batches", "value", False, "regression"),
    ("writer_duration", "p90", False, "regression"),
    ("gps", "value", False, "inconclusive"),
    ("test_duration", "value", False, "significant-but-small"),
    ("writer_duration", "p99", False, "improvement"),
    ("writer_duration", "mean", False, "no-meaningful-change"),
]
# The page's order: the primary rows, apart; then the secondaries that decided something;
# then, folded away, those that decided nothing (inconclusive, no meaningful change).
_UNDECIDED = ("inconclusive", "no-meaningful-change")
VERDICTS_ON_THE_PAGE = (
    [v for v in VERDICTS_IN_REPORT_ORDER if v[2]]
    + [v for v in VERDICTS_IN_REPORT_ORDER if not v[2] and v[3] not in _UNDECIDED]
    + [v for v in VERDICTS_IN_REPORT_ORDER if not v[2] and v[3] in _UNDECIDED]
)


@pytest.fixture(autouse=True)
def _report_cache_of_its_own(settings, tmp_path):
    """Each test has its own, empty figures cache ("reports"), not the data dir's."""
    settings.CACHES = {
        **settings.CACHES,
        "reports": {**settings.CACHES["reports"], "LOCATION": str(tmp_path / "report-cache")},
    }


RUNS_PER_SIDE = 3
WRITER_SAMPLES = 10


def writer_samples(side: str, i: int) -> list[float]:
    base = 6.0 if side == "A" else 6.6
    return [base + 0.01 * k + 0.1 * i for k in range(WRITER_SAMPLES)]


@pytest.fixture
def done_comparison(db):
    """sync-rcu-latency, 3 ok runs per side in ABBA order plus one panicked run on B, seven
    verdicts created out of report order."""
    tree_rev = RevisionFactory.create(ref="v6.12")
    c = ComparisonFactory.create(
        revision_a=tree_rev,
        revision_b=RevisionFactory.create(tree=tree_rev.tree, ref="rcu/next"),
        target=TargetFactory.create(name="qemu-x86_64", arch="x86_64"),
        benchmarks=["sync-rcu-latency"],
        cmdline_b="rcutree.jiffies_till_first_fqs=3 rcupdate.rcu_expedited=1",
        state="done", result="ok", verdict="regression",
    )  # fmt: skip
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok")
    c.save()
    order = 0
    for i in range(RUNS_PER_SIDE):
        for side in "AB" if i % 2 == 0 else "BA":
            run = RunFactory.create(
                comparison=c, side=side, index=i, order=order, state="done", result="ok",
                console_log=f"console of {side}{i}\nrcu-scale: writer-duration ...\n",
                wall_seconds=12.5, host="worker-1",
            )  # fmt: skip
            order += 1
            MeasurementFactory.create(run=run, samples=writer_samples(side, i))
            MeasurementFactory.create(run=run, metric="gps", unit="count", samples=[100.0 + i])
    RunFactory.create(
        comparison=c, side="B", index=RUNS_PER_SIDE, order=order, state="done",
        result="failed", error_code="panic", error_message="Kernel panic - not syncing: X",
        console_log="[    1.234] Kernel panic - not syncing: X\n",
    )  # fmt: skip
    for metric, statistic, primary, verdict in reversed(VERDICTS_IN_REPORT_ORDER):
        unit = "ms" if metric.endswith("duration") else "count"
        MetricVerdictFactory.create(
            comparison=c, metric=metric, statistic=statistic, is_primary=primary,
            verdict=verdict, median_a=6.05, median_b=6.65, shift_pct=9.9, ci_low_pct=8.1,
            ci_high_pct=11.7, p_value=0.0012, p_adjusted=0.0036,
            warnings=["drift against run order on side A (p=0.01)"] if metric == "gps" else [],
            details={"unit": unit, "relative": True, "adjustment": "holm" if primary else "bh"},
        )  # fmt: skip
    return c


@pytest.fixture
def failed_build_comparison(db):
    """Side B's build failed (make-failed); the comparison ended failed with build-failed."""
    series = PatchSeriesFactory.create(
        subject="[PATCH 0/2] rcu: shrink the expedited grace period",
        message_id="<20260101.1234-1-dev@example.org>", author="A Developer <dev@example.org>",
    )  # fmt: skip
    a = RevisionFactory.create(ref="v6.12")
    b = RevisionFactory.create(tree=a.tree, ref="v6.12", series=series)
    c = ComparisonFactory.create(
        revision_a=a, revision_b=b, state="done", result="failed", error_code="build-failed",
        error_message="build failed: side B (v6.12 + series): make-failed: make exited with 2",
    )  # fmt: skip
    c.build_a = BuildFactory.create(revision=a, state="done", result="ok", seconds=812.0)
    c.build_b = BuildFactory.create(
        revision=b, state="done", result="failed", error_code="make-failed",
        error_message="make exited with 2",
        log="CC kernel/rcu/tree.o\nkernel/rcu/tree.c:4242:1: error: expected ';' before '}'\n"
            "make[3]: *** [scripts/Makefile.build:229: kernel/rcu/tree.o] Error 1\n",
    )  # fmt: skip
    c.save()
    return c


@pytest.fixture
def running_comparison(db):
    c = ComparisonFactory.create(state="running")
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok")
    c.save()
    RunFactory.create(comparison=c, side="A", index=0, order=0, state="done", result="ok")
    RunFactory.create(comparison=c, side="B", index=0, order=1, state="running")
    RunFactory.create(comparison=c, side="B", index=1, order=2, state="done",
                      result="incomplete", error_code="timeout")  # fmt: skip
    return c


SLAB_PEAK_A = [100.0, 200.0, 300.0, 400.0]  # median 250, IQR [175, 325]
# The delays of bpf-slab's declared sweep (the report reads a benchmark through the registry).
DELAYS_MS = BENCHMARKS["bpf-slab"].spec.figures[0].x


@pytest.fixture
def slab_comparison(db):
    """bpf-slab, 4 ok runs per side; B's slab is 50 kB higher at every delay."""
    c = ComparisonFactory.create(benchmarks=["bpf-slab"], state="done", result="ok")
    order = 0
    for i in range(4):
        for side in "AB":
            run = RunFactory.create(comparison=c, benchmark="bpf-slab", side=side, index=i,
                                    order=order, state="done", result="ok")  # fmt: skip
            order += 1
            extra = 50.0 if side == "B" else 0.0
            for d in DELAYS_MS:
                for stat in ("peak", "mean"):
                    value = SLAB_PEAK_A[i] + extra - (30.0 if stat == "mean" else 0.0) + d
                    MeasurementFactory.create(run=run, benchmark="bpf-slab",
                                              metric=f"slab_kb_{stat}_d{d}", unit="kB",
                                              samples=[value])  # fmt: skip
    return c


# --- helpers the page tests share ---------------------------------------------------


def timed_run(c, side, index, seconds, result="ok", **kw):
    """A finished run that took `seconds` from start to end."""
    end = timezone.now()
    return RunFactory.create(
        comparison=c, side=side, index=index, order=index * 2 + (side == "B"), state="done",
        result=result, error_code="" if result == "ok" else "panic",
        started_at=end - timedelta(seconds=seconds), finished_at=end, **kw,
    )  # fmt: skip


def running_run(c, side, index):
    return RunFactory.create(comparison=c, side=side, index=index,
                             order=index * 2 + (side == "B"), state="running",
                             started_at=timezone.now())  # fmt: skip


def restricted_comparison(**kw):
    tree = TreeFactory.create(name="security", public=False)
    return ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree), revision_b=RevisionFactory.create(tree=tree),
        visibility=Comparison.Visibility.RESTRICTED, **kw,
    )  # fmt: skip


def query_count(client, url, **params):
    """The queries of one request, the list's filter choices not yet kept (the most)."""
    cache.clear()
    with CaptureQueriesContext(connection) as q:
        response = client.get(url, params)
    assert response.status_code == 200
    return len(q.captured_queries)


def assert_only_members_see(client, c, url):
    """`url` of a restricted comparison `c` is 404 to anonymous users and outsiders, 200 to a
    member of its tree."""
    assert client.get(url).status_code == 404
    client.force_login(UserFactory.create(username="outsider"))
    assert client.get(url).status_code == 404
    client.force_login(MembershipFactory.create(tree=c.revision_a.tree).user)
    assert client.get(url).status_code == 200
