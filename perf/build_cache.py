"""How fast is rcubench's build cache? One run, side by side, in a fresh data dir:

    cold       base tree, empty ccache, empty object dir (a new machine)
    trusted    a ref of the same tree one line away (fixtures/one-line.mbox committed as a
               branch): the slot's object dir and ccache do the incremental work
    untrusted  the base plus the same one-line change as a submitter's patch series: built
               in a throwaway copy of the slot's object dir with the ccache read-only, so
               nothing the series' Makefiles plant reaches a later build (SECURITY.md)
    hit        the base again: served from the artifact store, make does not run (median of 5)

Targets: trusted/cold <= 0.25 and hit/cold <= 0.01 (exit 1 when one is missed); the
untrusted ratio is reported (what the isolation costs), with no target.
Run: .venv/bin/python perf/build_cache.py [--arch x86_64|ppc64le]
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.build.builder import BuildRequest, BuildSettings, build_kernel

DEFAULT_TREE = Path("/var/lib/rcubench/trees/linux-6.12.git")
FRAGMENT = ("CONFIG_RCU_SCALE_TEST=y", "CONFIG_BPF_SYSCALL=y")
ONE_LINE = Path(__file__).parent / "fixtures/one-line.mbox"
BRANCH = "rcubench-perf-one-line"


def _tree_with_branch(root: Path, tree: str, ref: str) -> Path:
    """A bare clone of `tree` (sharing its objects) with the one-line change committed on
    a branch, so the same change can be built as a trusted ref."""
    bare = root / "tree.git"
    git = ["git", "-c", "core.hooksPath=/dev/null"]
    subprocess.run([*git, "clone", "-q", "--bare", "--shared", tree, str(bare)], check=True)
    work = root / "work"
    subprocess.run([*git, "--git-dir", str(bare), "worktree", "add", "-q", "--detach", str(work),
                    ref], check=True)  # fmt: skip
    env = {"GIT_COMMITTER_NAME": "perf", "GIT_COMMITTER_EMAIL": "perf@rcubench.invalid",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    subprocess.run([*git, "-C", str(work), "am", "-q", str(ONE_LINE)], check=True, env=env)
    subprocess.run([*git, "-C", str(work), "branch", BRANCH], check=True)
    return bare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="x86_64", choices=["x86_64", "ppc64le"])
    parser.add_argument("--tree", default=str(DEFAULT_TREE))
    parser.add_argument("--ref", default="v6.12.117-debian")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="rcubench-perf-", dir="/var/tmp"))
    root.chmod(0o755)
    try:
        tree = _tree_with_branch(root, args.tree, args.ref)
        settings = BuildSettings(
            root=root / "build", mirrors=root / "mirrors", ccache=root / "ccache"
        )
        base = BuildRequest(tree_url=str(tree), ref=args.ref, arch=args.arch,
                            fragments=FRAGMENT, allow_local=True)  # fmt: skip
        trusted_req = BuildRequest(**{**base.__dict__, "ref": BRANCH})
        series_req = BuildRequest(**{**base.__dict__, "mbox": ONE_LINE.read_bytes()})

        cold = build_kernel(base, settings)
        assert not cold.cached
        trusted = build_kernel(trusted_req, settings)
        assert not trusted.cached
        assert trusted.sha != cold.sha
        untrusted = build_kernel(series_req, settings)
        assert not untrusted.cached
        assert untrusted.sha not in (cold.sha, trusted.sha)
        hits = []
        for _ in range(5):
            hit = build_kernel(base, settings)
            assert hit.cached
            hits.append(hit.seconds)
        hit_s = statistics.median(hits)
        t_ratio, u_ratio = trusted.seconds / cold.seconds, untrusted.seconds / cold.seconds
        hit_ratio = hit_s / cold.seconds
        print(f"arch {args.arch}, {cold.toolchain}")
        print(f"cold build                       {cold.seconds:8.1f} s")
        print(f"rebuild, trusted ref (one line)  {trusted.seconds:8.1f} s")
        print(f"rebuild, untrusted series (same) {untrusted.seconds:8.1f} s")
        every = ", ".join(f"{h:.3f}" for h in hits)
        print(f"cache hit (median/5)             {hit_s:8.3f} s   (all: {every})")
        ok_t, ok_h = t_ratio <= 0.25, hit_ratio <= 0.01
        print(f"trusted/cold    {t_ratio:.3f}  (target <= 0.25: {'met' if ok_t else 'MISSED'})")
        print(f"untrusted/cold  {u_ratio:.3f}  (isolated: object-dir copy, read-only ccache)")
        print(f"hit/cold        {hit_ratio:.5f} (target <= 0.01: {'met' if ok_h else 'MISSED'})")
        return 0 if ok_t and ok_h else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
