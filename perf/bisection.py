"""Bisection on real builds and boots: does it find the planted patch, and only it?

Three series on the default kernel (webapp/bisections/tests/fixtures/, README there):
planted-6  six patches; the third makes every grace period wait one jiffy more before its
           first force-quiescent-state scan, the others change comments only;
broken-6   the same, but patch 2 does not build and patch 3 fixes it;
aa-6       six comment-only patches.
For each: the original comparison (base vs base + series, --runs a side), then, if its
p50 of sync-rcu-latency regressed, bisections of it one after another (--bisections), each
with fresh step comparisons. Targets (issue 33): planted: the culprit found and confirmed
in every bisection; aa: no culprit in every one (not bisected, or not confirmed); broken:
a range naming patch 2; at most ceil(log2 6) + 1 = 4 step comparisons before confirmation;
wall time per bisection with the base cached stated (target <= 30 min).

Run: .venv/bin/python perf/bisection.py [--series planted-6,aa-6,broken-6] [--runs 24]
     [--bisections 5]
It uses its own Redis database (13) and PostgreSQL database (rcubench_bisect, made afresh
and dropped at the end), the machine's data dir (its build cache and ccache: the base is
cached after the first build), and one Celery worker (solo pool) it starts and stops. Run it
on an otherwise idle machine.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from perf._local import broker_url, database_url, start_celery_worker

T = TypeVar("T")
BROKER = broker_url(13)
DB_NAME = "rcubench_bisect"
os.environ["CELERY_BROKER_URL"] = BROKER
os.environ["DATABASE_URL"] = database_url(DB_NAME)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django

from perf._db import reset_database

reset_database(DB_NAME, create=True)
django.setup()

from django.core.management import call_command

from webapp.bisections import services
from webapp.bisections.models import Bisection
from webapp.comparisons.models import Comparison
from webapp.comparisons.submission import ComparisonRequest, submit_comparison
from webapp.trees.services import DEFAULT_TREE, default_tree

FIXTURES = ROOT / "webapp" / "bisections" / "tests" / "fixtures"
P50 = ("sync-rcu-latency", "writer_duration", "p50")
BASE = "v6.12.117-debian"  # the default tree's tag (scripts/setup.sh, scripts/demo.sh)


def start_worker(log: Path) -> subprocess.Popen:
    env = {**os.environ, "RCUBENCH_BENCH_TARGETS": "qemu-x86_64", "RCUBENCH_INSTANCE": "perf-"}
    return start_celery_worker(["--pool", "solo", "--concurrency", "1", "--without-gossip",
                                "--without-mingle", "--hostname", "perf-bisect@%h",
                                "--loglevel", "INFO"], log, env)  # fmt: skip


def wait(what: Callable[[], T | None], timeout: float, step: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := what():
            return got
        time.sleep(step)
    sys.exit(f"timed out after {timeout:.0f} s")


def original(series: str, runs: int) -> Comparison:
    default_tree()  # registered on first use
    c = submit_comparison(ComparisonRequest(
        tree=DEFAULT_TREE, base_ref=BASE, series_mbox=(FIXTURES / f"{series}.mbox").read_bytes(),
        benchmarks=("sync-rcu-latency",), target="qemu-x86_64", min_runs=runs, max_runs=runs,
    ))  # fmt: skip
    return wait(lambda: Comparison.objects.filter(pk=c.pk, state="done").first(), 4 * 3600)


def bisect_once(c: Comparison) -> tuple[str, Bisection | None, float]:
    t = time.monotonic()
    try:
        b, _ = services.start(c.pk, statistic=P50)
    except services.BisectionRefused as exc:
        return f"not bisected: {exc}", None, 0.0
    b = wait(lambda: Bisection.objects.filter(pk=b.pk, state="done").first(), 4 * 3600)
    return b.outcome, b, time.monotonic() - t


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:+.2f}"


def describe(b: Bisection) -> str:
    steps = b.steps.order_by("pk")
    rows = [f"    {s.kind:6} @{s.position}: {s.answer or '-':8} {_num(s.shift):>8} "
            f"[{_num(s.ci_low)}, {_num(s.ci_high)}] comparison #{s.comparison_id}"
            for s in steps]  # fmt: skip
    return "\n".join([*rows, f"    {b.summary}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", default="planted-6,aa-6,broken-6")
    parser.add_argument("--runs", type=int, default=24, help="runs a side, every comparison")
    parser.add_argument("--bisections", type=int, default=5, help="per series")
    args = parser.parse_args()
    from django.conf import settings

    # The worker started here serves the target; its heartbeat need not be awaited.
    settings.RCUBENCH_REQUIRE_SERVED_TARGETS = False
    if args.runs < 24:
        os.environ["RCUBENCH_ALLOW_FEW_RUNS"] = "1"
        settings.RCUBENCH_ALLOW_FEW_RUNS = True
    log = Path(tempfile.mkdtemp(prefix="perf-bisect-")) / "worker.log"
    worker = start_worker(log)
    report = []
    try:
        for series in args.series.split(","):
            t = time.monotonic()
            c = original(series, args.runs)
            row = c.verdicts.filter(benchmark=P50[0], metric=P50[1], statistic=P50[2]).first()
            head = (f"{series}: original #{c.pk} {c.result} {c.verdict or c.error_code}, p50 "
                    f"{row.verdict if row else '-'} {row.shift_pct if row else ''}% "
                    f"[{row.ci_low_pct if row else ''}, {row.ci_high_pct if row else ''}] "
                    f"in {time.monotonic() - t:.0f} s")  # fmt: skip
            print(head, flush=True)
            report.append(head)
            for i in range(args.bisections):
                outcome, b, seconds = bisect_once(c)
                steps = b.steps.filter(kind="bisect").count() if b else 0
                line = (f"  bisection {i + 1}: {outcome}"
                        + (f" first {b.first} last {b.last}, {steps} step comparisons "
                           f"(budget {math.ceil(math.log2(b.n)) + 1}), {seconds / 60:.1f} min"
                           if b else ""))  # fmt: skip
                print(line, flush=True)
                report.append(line)
                if b is not None:
                    print(describe(b), flush=True)
                    report.append(describe(b))
                elif outcome.startswith("not bisected"):
                    break  # the same refusal every time
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        call_command("flush", interactive=False, verbosity=0)
    print("\n".join(["", "summary:", *report]))


if __name__ == "__main__":
    main()
