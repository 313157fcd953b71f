"""One whole bisection through a real worker: a four-patch series on the default kernel
whose third patch makes every grace period wait three jiffies more before its first
force-quiescent-state scan (fixtures/planted-4.mbox, p50 about +50%). The original
comparison, the step comparisons (their kernels built incrementally in the base's slot, the
base from the session's cache) and the confirmation all boot for real, 5 runs a side in one
look: the 24-run bisections of planted-6's one jiffy (+16%) are perf/bisection.py's.

The effect is that large so that one look at 5 v 5 decides every step (its ranks reach p
0.008, and the CIs measured at 10 v 10 were [+49.3, +52.3] for a step like B and
[-1.08, +0.42] for one like A, either far from the midpoint at +24.8). At one jiffy a
step's CI spanned -11% to +18% under a busy host, and on a quiet host whose boots differ
among themselves (STATS.md v3's boot-level effect) 10 v 10 left the fresh re-run's CI at
[+0.3, +19.4] against half the effect at +8.4. A maximum of 10 a side would not help
either: the sequential design's first look at 5 of 10 spends too little alpha to decide,
so every comparison ran to 10: 854 s for the test in a cold run of the suite, against
539 s with one look (alone, the session's kernel from a warm ccache; CIs [-0.43, +1.45]
and [+38.5, +51.8] against the midpoint at +25.1)."""

import math
import time
from pathlib import Path

import pytest

from conftest import BASE_TAG, DEFAULT_TREE
from webapp.bisections import services
from webapp.bisections.models import Bisection
from webapp.comparisons.submission import ComparisonRequest, submit_comparison
from webapp.comparisons.tests.conftest import wait_for_quiet
from webapp.trees.services import register_local_tree

pytestmark = pytest.mark.django_db(transaction=True)
PLANTED_4 = (Path(__file__).with_name("fixtures") / "planted-4.mbox").read_bytes()
RUNS = MAX_RUNS = 5  # a side, one look: 5 v 5 ranks reach p 0.008
P50 = ("sync-rcu-latency", "writer_duration", "p50")


def test_a_four_patch_series_is_bisected_to_its_third_patch_and_confirmed(celery_processes, env):
    share = wait_for_quiet()
    started = time.monotonic()
    c = submit_comparison(ComparisonRequest(
        tree=register_local_tree(DEFAULT_TREE).name, base_ref=BASE_TAG,
        series_mbox=PLANTED_4, benchmarks=("sync-rcu-latency",), target="qemu-x86_64",
        min_runs=RUNS, max_runs=MAX_RUNS,
    ))  # fmt: skip
    celery_processes.start_worker(**env)
    celery_processes.until_done(c, timeout=900)
    row = c.verdicts.get(benchmark=P50[0], metric=P50[1], statistic=P50[2])
    assert (c.result, row.verdict) == ("ok", "regression"), c.error_message
    original = time.monotonic() - started

    b, created = services.start(c.pk, statistic=P50)
    assert (created, b.n) == (True, 4)

    def ended() -> Bisection | None:
        found = Bisection.objects.get(pk=b.pk)
        return found if found.state == "done" else None

    b = celery_processes.wait_for(ended, 1800, step=2)
    steps = list(b.steps.select_related("comparison").order_by("pk"))
    table = "\n".join(f"{s.kind} @{s.position}: {s.answer} {s.shift} [{s.ci_low}, "
                      f"{s.ci_high}] {s.reason}" for s in steps)  # fmt: skip
    print(
        f"host busy share {share:.2f}; original {original:.0f} s, "
        f"bisection {time.monotonic() - started - original:.0f} s"
        f"\n{table}\n{b.summary}"
    )
    assert (b.result, b.outcome, b.first) == ("ok", "culprit", 3), f"{b.summary}\n{table}"
    bisect = [s for s in steps if s.kind == "bisect"]
    assert [s.position for s in bisect] == [2, 3]
    assert len(bisect) <= math.ceil(math.log2(4)) + 1
    assert {s.kind: s.answer for s in steps if s.kind in ("fresh", "revert")} == {
        "fresh": "like-b",
        "revert": "like-b",
    }
    assert all(s.comparison is not None and s.comparison.trigger == "bisection" for s in steps)
