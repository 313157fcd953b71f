"""The rcuscale window (issue 37): what init's awk costs the measured calls, and whether
its frame reaches the console before rcuscale powers the guest off.

The default tree's benchmark kernel boots sync-rcu-latency with two initramfs images in
ABBA order, --runs each: A's init from git (--old, by default the one before the window)
and B's from this tree (vm-images/init). Per side: the run medians of writer_duration's
p50, the share of grace periods within 0.1 ms of a whole jiffy (the tail share's
structure), the first 10 calls' sum and rcuscale's test duration, with Mann-Whitney p;
then B's frames: how many arrived, how long after the last writer's line the awk wrote
it, and how long before "Power down".
Run on an otherwise idle machine (docs/benchmarks.md, "Guards", has the figures):
    .venv/bin/python perf/rcuscale_window.py [--arch x86_64] [--runs 10] [--old 62db2f0]
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np
from scipy.stats import mannwhitneyu

import engine.vm.images as images
from benchmarks.registry import get
from benchmarks.sync_rcu_latency.parser import DURATION, SUMMARY
from engine.vm.domain import VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import DATA, kernel
from perf.tracing import abba
from perf.vm_overhead import TOPOLOGY, URI

_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]", re.M)


def _at(console: str, text: str) -> float | None:
    """The printk time of the first line holding `text`."""
    line = next((ln for ln in console.splitlines() if text in ln), None)
    m = _STAMP.match(line) if line else None
    return float(m.group(1)) if m else None


def initramfs(arch: str, init: Path, where: Path) -> Path:
    images.INIT = init  # build_initramfs copies INIT into the image
    where.mkdir(parents=True, exist_ok=True)
    return images.build_initramfs(arch, where, images.busybox_for(arch, DATA))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="x86_64")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--old", default="62db2f0", help="git revision of A's vm-images/init")
    args = parser.parse_args()
    image = kernel(args.arch).image
    cmdline = get("sync-rcu-latency").spec.cmdline
    rows: dict[str, list[tuple[float, float, float, float]]] = {"A": [], "B": []}
    frames: list[tuple[float, float] | None] = []
    with tempfile.TemporaryDirectory(prefix="rcubench-window-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        old = work / "init.old"
        show = ["/usr/bin/git", "-C", str(ROOT), "show", f"{args.old}:vm-images/init"]
        old.write_bytes(subprocess.run(show, check=True, capture_output=True).stdout)
        old.chmod(0o755)
        new = images.ROOT / "vm-images" / "init"
        rds = {
            "A": initramfs(args.arch, old, work / "A"),
            "B": initramfs(args.arch, new, work / "B"),
        }
        for i, side in enumerate(abba(args.runs)):
            spec = VMSpec(
                name=new_domain_name("perf-window"), arch=args.arch, kernel=image,
                initrd=rds[side], cmdline=cmdline, console_log=work / f"{i}.log",
                **TOPOLOGY[args.arch],  # type: ignore[arg-type]
            )  # fmt: skip
            c = run_vm(URI, spec, boot_timeout=300, run_timeout=300).console
            w = np.array([int(m.group("ns")) / 1e6 for m in DURATION.finditer(c)])
            total = SUMMARY.search(c)
            if not w.size or total is None:
                raise SystemExit(f"boot {i} ({side}): no rcuscale results on the console")
            share = float(np.mean(np.abs(w - np.rint(w)) < 0.1))
            rows[side].append((float(np.median(w)), share, float(w[:10].sum()),
                               int(total.group("dur")) / 1e6))  # fmt: skip
            if side == "B":
                done = [ln for ln in c.splitlines() if " has 100 measurements" in ln]
                m = _STAMP.match(done[-1]) if done else None
                frame = _at(c, "RCUBENCH-BEGIN v1 bench=rcuscale-window")
                off = _at(c, "reboot: Power down")
                if "bench=rcuscale-window status=ok" in c and m and frame and off:
                    frames.append((frame - float(m.group(1)), off - frame))
                else:
                    frames.append(None)
            print(side, rows[side][-1], flush=True)
    names = ("writer_duration p50 (ms)", "share within 0.1 ms of a jiffy", "first 10 calls (ms)",
             "test duration (ms)")  # fmt: skip
    print(f"\n{args.arch}, {args.runs} boots a side, ABBA; A = init of {args.old}, B = this tree's")
    for k, name in enumerate(names):
        a, b = [r[k] for r in rows["A"]], [r[k] for r in rows["B"]]
        p = mannwhitneyu(a, b).pvalue
        print(f"{name:<34} A {statistics.median(a):9.3f}  B {statistics.median(b):9.3f}  p {p:.3f}")
    got = [f for f in frames if f is not None]
    print(f"B's frames: {len(got)} of {len(frames)}", end="")
    if got:
        wake, ahead = zip(*got, strict=True)
        print(f"; written {1000 * min(wake):.0f}-{1000 * max(wake):.0f} ms after the last "
              f"writer's line, {1000 * min(ahead):.0f}-{1000 * max(ahead):.0f} ms before "
              "the power-off")  # fmt: skip
    else:
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
