"""How fast is rcubench's build cache? One run, three measurements, side by side.

    cold     base tree, empty ccache, empty object dir (a new machine)
    rebuild  the same base plus a one-line patch (fixtures/one-line.mbox): the slot's
             object dir and ccache do the incremental work
    hit      the base again: served from the artifact store, make does not run (median of 5)

Targets (issue 3): rebuild/cold <= 0.25, hit/cold <= 0.01. Exits 1 when one is missed.
Run: .venv/bin/python perf/build_cache.py [--arch x86_64|ppc64le]
"""

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workers.build.builder import BuildRequest, BuildSettings, build

DEFAULT_TREE = Path("/var/lib/rcubench/trees/linux-6.12.git")
FRAGMENT = ("CONFIG_RCU_SCALE_TEST=y", "CONFIG_BPF_SYSCALL=y")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="x86_64", choices=["x86_64", "ppc64le"])
    parser.add_argument("--tree", default=str(DEFAULT_TREE))
    parser.add_argument("--ref", default="v6.12.117-debian")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="rcubench-perf-", dir="/var/tmp"))
    root.chmod(0o755)
    try:
        settings = BuildSettings(
            root=root / "build", mirrors=root / "mirrors", ccache=root / "ccache"
        )
        base = BuildRequest(
            tree_url=args.tree, ref=args.ref, arch=args.arch, fragments=FRAGMENT, allow_local=True
        )
        patched = BuildRequest(**{**base.__dict__, "mbox": (
            Path(__file__).parent / "fixtures/one-line.mbox").read_bytes()})  # fmt: skip

        cold = build(base, settings)
        assert not cold.cached
        rebuild = build(patched, settings)
        assert not rebuild.cached
        assert rebuild.sha != cold.sha
        hits = []
        for _ in range(5):
            hit = build(base, settings)
            assert hit.cached
            hits.append(hit.seconds)
        hit_s = statistics.median(hits)
        rebuild_ratio, hit_ratio = rebuild.seconds / cold.seconds, hit_s / cold.seconds
        print(f"arch {args.arch}, {cold.toolchain}")
        print(f"cold build            {cold.seconds:8.1f} s")
        print(f"rebuild (one line)    {rebuild.seconds:8.1f} s")
        every = ", ".join(f"{h:.3f}" for h in hits)
        print(f"cache hit (median/5)  {hit_s:8.3f} s   (all: {every})")
        ok_r, ok_h = rebuild_ratio <= 0.25, hit_ratio <= 0.01
        print(f"rebuild/cold  {rebuild_ratio:.3f}  (target <= 0.25: {'met' if ok_r else 'MISSED'})")
        print(f"hit/cold      {hit_ratio:.5f} (target <= 0.01: {'met' if ok_h else 'MISSED'})")
        return 0 if ok_r and ok_h else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
