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
Target (issue 6): demo / floor <= 1.3.

Run: .venv/bin/python perf/time_to_verdict.py [--boots 48]
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
import subprocess
import sys
import tempfile
import time
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
from webapp.comparisons.models import Comparison
from webapp.states import Result

MBOX = ROOT / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"


def fresh_data_dir(root: Path, name: str) -> Path:
    """An empty data dir (no artifacts, no slots, empty ccache) sharing only what set-up
    made: the guest's busybox and the imported kernel tree."""
    data = root / name
    (data / "ccache").mkdir(parents=True)
    for shared in ("guest", "trees"):
        (data / shared).symlink_to(MACHINE_DATA / shared)
    subprocess.run(["/usr/bin/chown", "-R", "rcubench-build", str(data / "ccache")], check=True)
    for d in (root, data):
        d.chmod(0o755)
    return data


@dataclasses.dataclass
class Demo:
    seconds: float
    verdict: str
    table: str
    parts: dict[str, float]


def demo(data: Path, aa: bool) -> Demo:
    env = {**os.environ, "RCUBENCH_DATA_DIR": str(data),
           "RCUBENCH_CCACHE_DIR": str(data / "ccache"), "CELERY_BROKER_URL": BROKER,
           "RCUBENCH_BENCH_TARGETS": "qemu-x86_64",
           "RCUBENCH_DEMO_AA": "1" if aa else "0"}  # fmt: skip
    before = Comparison.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    out = subprocess.run(["/bin/bash", "scripts/demo.sh"], cwd=ROOT, env=env, capture_output=True,
                         text=True)  # fmt: skip
    c = Comparison.objects.filter(pk__gt=before).order_by("pk").last()
    if c is None or c.finished_at is None:
        sys.exit(f"the demo did not finish:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    # The verdict table and the line after it; the progress bars before it are noise here.
    lines = out.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("metric ")), len(lines))
    # Its report URL would point into rcubench_ttv, which is dropped at the end.
    table = re.sub(r"\s+report: \S+", "", "\n".join(lines[start:]))
    return Demo((c.finished_at - c.created_at).total_seconds(), c.verdict, table, breakdown(c))


def breakdown(c: Comparison) -> dict[str, float]:
    """Where the demo's time went, from what the pipeline stored: submission to both kernels
    built, the run phase, and the boots themselves within it (the rest of the run phase is
    orchestration: dispatch, domain set-up, ingestion, analysis)."""
    assert c.finished_at is not None
    built = max(b.finished_at for b in (c.build_a, c.build_b) if b and b.finished_at)
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
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rcubench-ttv-", dir="/var/tmp"))
    worker = None
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
        demo_data = fresh_data_dir(root, "demo")
        env = {**os.environ, "RCUBENCH_DATA_DIR": str(demo_data),
               "RCUBENCH_CCACHE_DIR": str(demo_data / "ccache"), "CELERY_BROKER_URL": BROKER,
               "RCUBENCH_BENCH_TARGETS": "qemu-x86_64"}  # fmt: skip
        subprocess.run([sys.executable, "-m", "celery", "-A", "workers.celery_app", "purge", "-f"],
                       cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
        worker = subprocess.Popen(
            # As scripts/service.sh starts it for `make demo`: one prefork child.
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--umask",
             "022", "--concurrency", "1", "--loglevel", "WARNING"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=(root / "worker.log").open("w"),
        )  # fmt: skip
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
