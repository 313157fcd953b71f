"""Time to verdict of `make demo` against the machine's floor, and the A/A demo, in one run.

demo   the demo comparison (scripts/demo.sh: base vs base + demo/ patch, sync-rcu-latency,
       24 runs per side first) through the whole pipeline: a real Celery worker, builds,
       ABBA runs under libvirt, the engine. Cold: a fresh data dir and an empty ccache.
       Time: the comparison's created_at to finished_at, as stored.
floor  what the same work needs at the least, measured after it on the same machine, also
       cold: the base kernel built from scratch (fresh ccache), base + patch built
       incrementally in the same slot, and 48 bare QEMU boots of the benchmark (no
       libvirt, no database), one after another.
A/A    RCUBENCH_DEMO_AA=1 scripts/demo.sh: the base against itself (its build is cached by
       then); it must not report a regression.
Target (issue 6): demo / floor <= 1.3. These runs trace nothing (RCUBENCH_DIAGNOSE=never):
a diagnosis of the demo would share the worker with the A/A demo.

--diagnose K  instead: the demo only, as a 24 + 24 comparison (--max-runs 24: one look),
       with RCUBENCH_DIAGNOSE=changes and K traced runs a side (docs/tracing.md), waited
       for to the last; fresh artifacts, but the machine's
       ccache (the builds are not what this measures). It prints when the verdict was
       stored against when the first traced run started (the verdict never waits), and
       the time the diagnosis adds after the verdict as a share of the time to verdict
       (builds included) and of its run phase alone (kernels built to verdict, what a
       build cache hit leaves). Target (issue 34): <= 25% of the time to verdict.

Run: .venv/bin/python perf/time_to_verdict.py [--boots 48 | --diagnose 8]
It uses its own Redis database (14) and its own PostgreSQL database (rcubench_ttv, made
afresh and dropped at the end), so a `make up` worker never takes its tasks and the build
cache of the main database cannot make the "cold" demo warm. Run it on an otherwise idle
machine: another comparison's VMs, or `make test`, share the two cores and skew the ratio.
"""

import argparse
import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from perf._local import broker_url, database_url

BROKER = broker_url(14)
DB_NAME = "rcubench_ttv"
os.environ["CELERY_BROKER_URL"] = BROKER
os.environ["DATABASE_URL"] = database_url(DB_NAME)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django

from perf._db import reset_database

reset_database(DB_NAME, create=True)
django.setup()

from benchmarks.registry import get
from engine.build.builder import build_kernel
from engine.vm.domain import VMSpec
from perf._kernels import DATA as MACHINE_DATA
from perf._kernels import build_settings, initramfs, request
from perf.vm_overhead import TOPOLOGY, bare_cmd
from webapp.comparisons.models import Comparison, Run, Target
from webapp.comparisons.serving import served_by
from webapp.states import Result, State

MBOX = ROOT / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"


def fresh_data_dir(root: Path, name: str, *, warm_ccache: bool = False) -> Path:
    """An empty data dir (no artifacts, no slots, empty ccache) sharing only what set-up
    made: the guest's busybox and the imported kernel tree; `warm_ccache`: the machine's
    ccache too, as a service that has built before has it."""
    data = root / name
    data.mkdir(parents=True)
    shared = ("guest", "trees", "ccache") if warm_ccache else ("guest", "trees")
    for what in shared:
        (data / what).symlink_to(MACHINE_DATA / what)
    if not warm_ccache:
        (data / "ccache").mkdir()
        subprocess.run(["/usr/bin/chown", "-R", "rcubench-build", str(data / "ccache")],
                       check=True)  # fmt: skip
    for d in (root, data):
        d.chmod(0o755)
    return data


def worker_env(data: Path, diagnose: int = 0) -> dict[str, str]:
    """The settings the worker and the demo's submission share."""
    return {"RCUBENCH_DATA_DIR": str(data), "RCUBENCH_CCACHE_DIR": str(data / "ccache"),
            "CELERY_BROKER_URL": BROKER, "RCUBENCH_BENCH_TARGETS": "qemu-x86_64",
            "RCUBENCH_DIAGNOSE": "changes" if diagnose else "never",
            "RCUBENCH_DIAGNOSIS_RUNS": str(diagnose or 6)}  # fmt: skip


@dataclasses.dataclass
class Demo:
    seconds: float
    verdict: str
    table: str
    parts: dict[str, float]
    pk: int


def demo(data: Path, aa: bool, *args: str) -> Demo:
    env = {**os.environ, **worker_env(data),
           "RCUBENCH_DEMO_AA": "1" if aa else "0"}  # fmt: skip
    before = Comparison.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    out = subprocess.run(["/bin/bash", "scripts/demo.sh", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True)  # fmt: skip
    c = Comparison.objects.filter(pk__gt=before).order_by("pk").last()
    if c is None or c.finished_at is None:
        sys.exit(
            f"the demo did not finish (exit {out.returncode}):\n{out.stdout[-3000:]}\n"
            f"{out.stderr[-3000:]}"
        )
    # The verdict table and the line after it; the progress bars before it are noise here.
    lines = out.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("metric ")), len(lines))
    # Its report URL would point into rcubench_ttv, which is dropped at the end.
    table = re.sub(r"\s+report: \S+", "", "\n".join(lines[start:]))
    return Demo((c.finished_at - c.created_at).total_seconds(), c.verdict, table, breakdown(c),
                c.pk)  # fmt: skip


def diagnosis(pk: int, timeout: float = 3600) -> dict[str, float]:
    """Wait for the demo's traced runs to end; where their time went against the verdict's."""
    c = Comparison.objects.get(pk=pk)
    assert c.finished_at is not None
    deadline = time.monotonic() + timeout
    while True:
        traced = list(Run.objects.filter(comparison=c, traced=True))
        if traced and all(r.state == State.DONE for r in traced):
            break
        c.refresh_from_db()
        if time.monotonic() > deadline or (not traced and c.diagnosis_per_side == 0):
            why = f"diagnosis_per_side {c.diagnosis_per_side}, verdict {c.verdict}"
            sys.exit(f"comparison {pk}: {len(traced)} traced runs, not all ended ({why})")
        time.sleep(5)
    built = built_at(c)
    first = min(r.started_at for r in traced if r.started_at)
    last = max(r.finished_at for r in traced if r.finished_at)
    untraced = [r.wall_seconds for r in c.runs.filter(traced=False, result=Result.OK)]
    ok = [r for r in traced if r.result == Result.OK]
    return {
        "time to verdict": (c.finished_at - c.created_at).total_seconds(),
        "run phase (kernels built to verdict)": (c.finished_at - built).total_seconds(),
        "verdict stored to first traced run started": (first - c.finished_at).total_seconds(),
        "verdict to last traced run ended": (last - c.finished_at).total_seconds(),
        "traced runs (ok)": len(ok),
        "traced runs (all)": len(traced),
        "VM wall, traced (median)": statistics.median(r.wall_seconds or 0.0 for r in ok),
        "VM wall, untraced (median)": statistics.median(w or 0.0 for w in untraced),
    }


def diagnose_main(k: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="rcubench-ttv-", dir="/var/tmp"))
    worker = None
    try:
        data = fresh_data_dir(root, "demo", warm_ccache=True)
        worker = start_worker(root, data, k)
        ab = demo(data, False, "--max-runs", "24")  # the 24 + 24 comparison
        d = diagnosis(ab.pk)
    finally:
        if worker is not None:
            worker.kill()
        shutil.rmtree(root, ignore_errors=True)
        reset_database(DB_NAME, create=False)
    print(ab.table)
    for what, value in d.items():
        print(f"  {what:>45}: {value:8.1f}")
    added = d["verdict to last traced run ended"]
    ttv, phase = d["time to verdict"], d["run phase (kernels built to verdict)"]
    print(f"verdict: {ab.verdict}; the verdict waited for no traced run: "
          f"{'yes' if d['verdict stored to first traced run started'] >= 0 else 'NO'}")  # fmt: skip
    print(f"{k} traced runs a side add {added:.0f} s after the verdict: {100 * added / ttv:.0f}% "
          f"of the time to verdict ({ttv:.0f} s; target <= 25%: "
          f"{'PASS' if added <= 0.25 * ttv else 'FAIL'}), {100 * added / phase:.0f}% of its "
          f"run phase ({phase:.0f} s)")  # fmt: skip


def start_worker(root: Path, data: Path, diagnose: int = 0) -> subprocess.Popen[bytes]:
    env = {**os.environ, **worker_env(data, diagnose)}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    subprocess.run([sys.executable, "-m", "celery", "-A", "workers.celery_app", "purge", "-f"],
                   cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
    worker = subprocess.Popen(
        # As scripts/service.sh starts it for `make demo`: one prefork child.
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--umask",
         "022", "--concurrency", "1", "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=(root / "worker.log").open("w"),
    )  # fmt: skip
    # A submission to a target no worker serves is refused: wait for its first heartbeat.
    target = Target.objects.get(name="qemu-x86_64")
    deadline = time.monotonic() + 120
    while not served_by(target):
        if worker.poll() is not None or time.monotonic() > deadline:
            worker.kill()
            sys.exit(f"the worker never served {target.name}: see {root / 'worker.log'}")
        time.sleep(1)
    return worker


def built_at(c: Comparison) -> datetime:
    """When the later of the comparison's two kernels was built."""
    return max(b.finished_at for b in (c.build_a, c.build_b) if b and b.finished_at)


def breakdown(c: Comparison) -> dict[str, float]:
    """Where the demo's time went, from what the pipeline stored: submission to both kernels
    built, the run phase, and the boots themselves within it (the rest of the run phase is
    orchestration: dispatch, domain set-up, ingestion, analysis)."""
    assert c.finished_at is not None
    built = built_at(c)
    runs = list(c.runs.all())
    ok = [r for r in runs if r.result == Result.OK]
    boots = sum(r.wall_seconds or 0.0 for r in runs)
    return {
        "submit to kernels built": (built - c.created_at).total_seconds(),
        f"runs ({len(ok)} ok, {len(runs) - len(ok)} replaced) to verdict": (
            c.finished_at - built
        ).total_seconds(),
        "  of which VM wall time": boots,
    }


def floor(data: Path, boots: int) -> dict[str, float]:
    settings, base_request = build_settings(data), request("x86_64")
    took: dict[str, float] = {}
    t = time.monotonic()
    base = build_kernel(base_request, settings)
    took["cold build"] = time.monotonic() - t
    t = time.monotonic()
    build_kernel(dataclasses.replace(base_request, mbox=MBOX.read_bytes()), settings)
    took["incremental build"] = time.monotonic() - t
    initrd = initramfs("x86_64", data)
    spec = VMSpec(name="floor", arch="x86_64", kernel=base.image,
                  initrd=initrd, cmdline=get("sync-rcu-latency").spec.cmdline,
                  console_log=data / "floor.log",
                  **TOPOLOGY["x86_64"])  # type: ignore[arg-type]  # fmt: skip
    t = time.monotonic()
    for _ in range(boots):
        subprocess.run(bare_cmd(spec), check=True, capture_output=True, timeout=300)
    took[f"{boots} bare boots"] = time.monotonic() - t
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=48)
    parser.add_argument("--diagnose", type=int, default=0, metavar="K")
    args = parser.parse_args()
    if args.diagnose:
        diagnose_main(args.diagnose)
        return
    root = Path(tempfile.mkdtemp(prefix="rcubench-ttv-", dir="/var/tmp"))
    worker = None
    try:
        demo_data = fresh_data_dir(root, "demo")
        worker = start_worker(root, demo_data)
        ab = demo(demo_data, aa=False)
        aa = demo(demo_data, aa=True)
        worker.terminate()
        worker.wait(timeout=60)
        worker = None
        parts = floor(fresh_data_dir(root, "floor"), args.boots)
    finally:
        if worker is not None:
            worker.kill()
        shutil.rmtree(root, ignore_errors=True)
        reset_database(DB_NAME, create=False)
    floor_s = sum(parts.values())
    print(ab.table)
    print(f"\ndemo (cold, through the pipeline): {ab.seconds:8.1f} s   verdict: {ab.verdict}")
    for what, secs in ab.parts.items():
        print(f"  {what:>40}: {secs:8.1f} s")
    print(f"floor (cold build + incremental build + {args.boots} bare boots): {floor_s:8.1f} s")
    for what, secs in parts.items():
        print(f"  {what:>40}: {secs:8.1f} s")
    ratio = ab.seconds / floor_s
    print(f"time to verdict / floor = {ratio:.3f}   target <= 1.3: "
          f"{'PASS' if ratio <= 1.3 else 'FAIL'}")  # fmt: skip
    print(f"\nA/A demo (base vs base, build cached): {aa.seconds:.1f} s   verdict: {aa.verdict}")
    print(aa.table)
    print(f"A/A reports no regression: {'PASS' if aa.verdict != 'regression' else 'FAIL'}")


if __name__ == "__main__":
    main()
