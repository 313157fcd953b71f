"""Runs per hour of one comparison with one and with two bench workers on this machine
(issue 20, scaling a): real boots, side by side in one run.

For each N in --workers (default 1,2): N bench worker processes (`celery worker -Q
bench.qemu-x86_64 -c 1`, separate processes on one queue, as N hosts' workers would be, or
as an operator would start more on one host) plus the control and analysis workers, all
the project's real Celery app, run one comparison to its first look: sync-rcu-latency,
--runs per side (48 boots at the default 24), each a real TCG boot of the x86_64 kernel
under this host's libvirtd (target qemu-x86_64: 1 socket x 2 cores x 2 threads, 1 GiB).
Both sides boot the same kernel (an A/A comparison of one revision): throughput does not
depend on the verdict, and the writer-duration medians show what sharing the cores did to
the measurement. The kernel is built (or taken from the machine's build cache) by the same
engine the workers use, and stored as the revision's done build, so the comparison goes
straight to runs.

Per N it prints: wall from the first run's start to the last run's end, runs/hour, the
median run duration (claim to stored, from the Run rows) and VM wall time (VM start to
end), the runs flagged contended and the median share of the host's CPU others used while a
run booted (engine/run/hostload.py), the median writer_duration p50 of the runs, and the machine's
busy cores over the span (/proc/stat). Then the ratio runs/hour(2) / runs/hour(1).

Its own PostgreSQL database (rcubench_bw, made afresh, dropped at the end) and Redis
database (10), and VM names labelled bw-, so neither a `make up` nor the tests see it.
Run it on an otherwise idle machine: another process on the two cores changes both the
throughput and the contention it reports.
Run: .venv/bin/python perf/bench_workers.py [--workers 1,2] [--runs 24]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from perf._local import broker_url, database_url

BROKER = broker_url(10)
DB_NAME = "rcubench_bw"
DB_URL = database_url(DB_NAME)
QUEUE = "bench.qemu-x86_64"
os.environ.update({
    "DATABASE_URL": DB_URL, "CELERY_BROKER_URL": BROKER, "RCUBENCH_INSTANCE": "bw-",
    "RCUBENCH_SERVE": "qemu-x86_64", "RCUBENCH_ALLOW_FEW_RUNS": "true",
    "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
    "DJANGO_SETTINGS_MODULE": "webapp.settings",
    # Several workers on one host: none pins its guests to the CPUs the others pin to.
    "RCUBENCH_VM_PIN": "false",
})  # fmt: skip


from perf._db import reset_database
from perf.control_plane import machine_cpu, stop


def worker(logs: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    log = logs / f"{name}.log"
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", *args,
         "-n", f"{name}@bw", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env={**os.environ, "RCUBENCH_LOG_FILE": str(log)},
        stdout=subprocess.DEVNULL, stderr=(logs / f"{name}.err").open("a"),
        start_new_session=True,
    )  # fmt: skip


def _no_other_workers() -> None:
    """A worker left on this broker (an interrupted earlier run) would take runs too."""
    # Imported here: after main() has pointed Django at this script's own database.
    from workers.celery_app import app

    if others := [name for reply in app.control.ping(timeout=2.0) or [] for name in reply]:
        sys.exit(f"workers already on {BROKER}: {sorted(others)}; stop them first")


def wait_ready(names: list[str], procs: list[subprocess.Popen[bytes]]) -> None:
    # Imported here: after main() has pointed Django at this script's own database.
    from workers.celery_app import app

    deadline = time.monotonic() + 120
    while True:
        answered = {name for reply in app.control.ping(timeout=1.0) or [] for name in reply}
        if all(f"{n}@bw" in answered for n in names):
            return
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            sys.exit(f"workers did not start (answered: {sorted(answered)})")


def seed() -> dict[str, Any]:
    """A revision of the default tree whose build, the one the orchestrator looks up for
    it (every benchmark's Kconfig), is done with the real kernel."""
    from django.utils import timezone

    # Imported here: after main() has pointed Django at this script's own database.
    from benchmarks.registry import BENCHMARKS, kconfig_for
    from engine.build import kconfig
    from engine.build.arch import profile
    from perf import _kernels
    from webapp.comparisons.models import Target
    from webapp.states import Result, State
    from webapp.trees.models import Build, Revision
    from webapp.trees.services import default_tree

    print("kernel: building or taking it from the build cache ...", flush=True)
    out = _kernels.kernel("x86_64")
    meta = json.loads((out.artifact_dir / "meta.json").read_text())
    fragments = kconfig_for(BENCHMARKS)
    rev = Revision.objects.create(tree=default_tree(), ref=_kernels.REF, sha="b" * 40)
    now = timezone.now()
    Build.objects.create(
        revision=rev, arch="x86_64", sha=rev.sha,
        config_hash=kconfig.config_hash(profile("x86_64"),
                                        kconfig.merge(profile("x86_64"), fragments)),
        kconfig="".join(f"{line}\n" for line in fragments), state=State.DONE,
        result=Result.OK, artifact_dir=str(out.artifact_dir), image_name=meta["image"],
        started_at=now, finished_at=now, seconds=0.0,
    )  # fmt: skip
    return {"revision": rev, "target": Target.objects.get(name="qemu-x86_64")}


def measure(n: int, runs: int, seeded: dict[str, Any], logs: Path) -> dict[str, Any]:
    import redis
    from django.db import transaction

    # Imported here: after main() has pointed Django at this script's own database.
    from webapp import dispatch
    from webapp.comparisons.models import Comparison, ComparisonState, Measurement, Run
    from webapp.states import Result, State

    redis.Redis.from_url(BROKER).flushdb()
    _no_other_workers()
    names = ["control", "analysis", *(f"bench{i}" for i in range(1, n + 1))]
    logs = logs / f"n{n}"  # each N's own: a worker's log file starts empty
    logs.mkdir()
    procs = [worker(logs, "control", "-Q", "control", "-c", "2"),
             worker(logs, "analysis", "-Q", "analysis", "-c", "1")]  # fmt: skip
    procs += [worker(logs, f"bench{i}", "-Q", QUEUE, "-c", "1") for i in range(1, n + 1)]
    try:
        wait_ready(names, procs)
        with transaction.atomic():
            c = Comparison.objects.create(
                revision_a=seeded["revision"], revision_b=seeded["revision"],
                benchmarks=["sync-rcu-latency"], target=seeded["target"], min_runs=runs,
                max_runs=runs, trigger=Comparison.Trigger.CLI,
                requested_by="perf/bench_workers",
            )  # fmt: skip
            dispatch.send_advance(c.pk)
        cpu0, t0 = machine_cpu(), time.monotonic()
        while Comparison.objects.get(pk=c.pk).state != ComparisonState.DONE:
            if time.monotonic() - t0 > 60 * 60:
                sys.exit(f"comparison {c.pk} not done after an hour: see {logs}")
            time.sleep(1.0)
        cpu1, t1 = machine_cpu(), time.monotonic()
    finally:
        stop(procs)
    c.refresh_from_db()
    done = list(Run.objects.filter(comparison=c, state=State.DONE).order_by("started_at"))
    ok = [r for r in done if r.result == Result.OK]
    times = {r.pk: (r.started_at, r.finished_at) for r in done if r.started_at and r.finished_at}
    first = min(start for start, _ in times.values())
    span = (max(end for _, end in times.values()) - first).total_seconds()
    run_s = [(end - start).total_seconds() for pk, (start, end) in times.items()
             if pk in {r.pk for r in ok}]  # fmt: skip
    p50s = [statistics.median(samples) for samples in Measurement.objects.filter(
        run__in=ok, metric="writer_duration").values_list("samples", flat=True)]  # fmt: skip
    other = Counter(f"{r.error_code or r.result}: {r.error_message[:200]}"
                    for r in done if r not in ok)  # fmt: skip
    return {
        "n": n,
        "comparison": c.pk,
        "verdict": c.verdict or c.result or c.error_code,
        "runs_ok": len(ok),
        "runs_other": len(done) - len(ok),
        "other_codes": dict(other),
        "span_s": span,
        "runs_per_hour": len(ok) / span * 3600,
        "run_s": statistics.median(run_s),
        "contended": sum(1 for r in ok if r.contended),
        "wall_s": statistics.median(r.wall_seconds for r in ok if r.wall_seconds is not None),
        "busy_share": statistics.median(
            r.host_busy_share for r in ok if r.host_busy_share is not None
        ),
        "writer_p50_ms": statistics.median(p50s) if p50s else float("nan"),
        "busy_cores": (cpu1 - cpu0) / (t1 - t0),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="bench worker counts, in order")
    parser.add_argument("--runs", type=int, default=24, help="runs per side")
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    reset_database(DB_NAME, create=True)
    logs = Path(tempfile.mkdtemp(prefix="rcubench-bw-"))
    results = []
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
        import django

        django.setup()
        seeded = seed()
        for n in (int(x) for x in args.workers.split(",")):
            print(f"N = {n} bench worker(s): {2 * args.runs} boots ...", flush=True)
            results.append(measure(n, args.runs, seeded, logs))
    finally:
        reset_database(DB_NAME, create=False)
    print(f"\nlogs: {logs}")
    print(
        "N  runs ok  other  span s  runs/hour  run s  VM s  contended  others' share  "
        "writer_duration p50  busy cores of 2  verdict"
    )
    for r in results:
        print(f"{r['n']:<2} {r['runs_ok']:8} {r['runs_other']:6} {r['span_s']:7.1f} "
              f"{r['runs_per_hour']:10.0f} {r['run_s']:6.2f} {r['wall_s']:5.2f} "
              f"{r['contended']:10} {r['busy_share']:14.2f} {r['writer_p50_ms']:20.2f} "
              f"{r['busy_cores']:16.2f}  {r['verdict']}  {r['other_codes'] or ''}")  # fmt: skip
    print(
        "(run s, VM s, others' share and writer_duration p50: medians over the ok runs; "
        "writer_duration in ms)"
    )
    if len(results) >= 2:
        base = results[0]["runs_per_hour"]
        for r in results[1:]:
            print(f"runs/hour with {r['n']} workers / with {results[0]['n']}: "
                  f"{r['runs_per_hour'] / base:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
