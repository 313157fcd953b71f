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
It uses its own Redis database (14), so a `make up` worker never takes its tasks; the
comparisons land in the main database and show on the running web app.
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
BROKER = "redis://127.0.0.1:6379/14"
os.environ["CELERY_BROKER_URL"] = BROKER
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django

django.setup()

from benchmarks.registry import BENCHMARKS, get, kconfig_for
from perf.vm_overhead import TOPOLOGY, bare_cmd
from webapp.comparisons.models import Comparison
from workers.build.builder import BuildRequest, BuildSettings, build
from workers.vm.domain import VMSpec
from workers.vm.images import build_initramfs, busybox_for

MACHINE_DATA = Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench"))
TREE = MACHINE_DATA / "trees" / "linux-6.12.git"
BASE = "v6.12.117-debian"
MBOX = ROOT / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"


def fresh_data_dir(root: Path, name: str) -> Path:
    """An empty data dir (no artifacts, no slots, empty ccache) sharing only the guest's
    busybox, which set-up fetched."""
    data = root / name
    (data / "ccache").mkdir(parents=True)
    (data / "guest").symlink_to(MACHINE_DATA / "guest")
    subprocess.run(["/usr/bin/chown", "-R", "rcubench-build", str(data / "ccache")], check=True)
    for d in (root, data):
        d.chmod(0o755)
    return data


def demo(data: Path, aa: bool) -> tuple[float, str, str]:
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
    table = "\n".join(line for line in out.stdout.splitlines() if not re.search(r"\r|it/s", line))
    return (c.finished_at - c.created_at).total_seconds(), c.verdict, table


def floor(data: Path, boots: int) -> dict[str, float]:
    settings = BuildSettings(root=data / "build", mirrors=data / "mirrors", ccache=data / "ccache")
    request = BuildRequest(tree_url=str(TREE), ref=BASE, arch="x86_64",
                           fragments=kconfig_for(BENCHMARKS), allow_local=True)  # fmt: skip
    took: dict[str, float] = {}
    t = time.monotonic()
    base = build(request, settings)
    took["cold build"] = time.monotonic() - t
    t = time.monotonic()
    build(dataclasses.replace(request, mbox=MBOX.read_bytes()), settings)
    took["incremental build"] = time.monotonic() - t
    initrd = build_initramfs("x86_64", data / "images", busybox_for("x86_64", data))
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
        demo_data = fresh_data_dir(root, "demo")
        env = {**os.environ, "RCUBENCH_DATA_DIR": str(demo_data),
               "RCUBENCH_CCACHE_DIR": str(demo_data / "ccache"), "CELERY_BROKER_URL": BROKER,
               "RCUBENCH_BENCH_TARGETS": "qemu-x86_64"}  # fmt: skip
        subprocess.run([sys.executable, "-m", "celery", "-A", "workers.celery_app", "purge", "-f"],
                       cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--pool",
             "solo", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=(root / "worker.log").open("w"),
        )  # fmt: skip
        demo_s, verdict, table = demo(demo_data, aa=False)
        print(table)
        aa_s, aa_verdict, aa_table = demo(demo_data, aa=True)
        worker.terminate()
        worker.wait(timeout=60)
        worker = None
        parts = floor(fresh_data_dir(root, "floor"), args.boots)
    finally:
        if worker is not None:
            worker.kill()
        shutil.rmtree(root, ignore_errors=True)
    floor_s = sum(parts.values())
    print(f"\ndemo (cold, through the pipeline): {demo_s:8.1f} s   verdict: {verdict}")
    for what, s in parts.items():
        print(f"  floor part {what:>20}: {s:8.1f} s")
    print(f"floor (cold build + incremental build + {args.boots} bare boots): {floor_s:8.1f} s")
    ratio = demo_s / floor_s
    verdict_line = "PASS" if ratio <= 1.3 else "FAIL"
    print(f"time to verdict / floor = {ratio:.3f}   target <= 1.3: {verdict_line}")
    print(f"\nA/A demo (base vs base, build cached): {aa_s:.1f} s   verdict: {aa_verdict}")
    print(aa_table)
    ok = aa_verdict != "regression"
    print(f"A/A reports no regression: {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
