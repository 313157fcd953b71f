"""Boot sync-rcu-latency once with the RCU tracepoints on and save the raw console as a
trace fixture: benchmarks/rcutrace/fixtures/<arch>-<machine>-tcg[-<label>].log.

The kernel is the default tree's benchmark kernel with the tracing fragment
(benchmarks.rcutrace.KCONFIG), optionally with a series on top (`--mbox`, e.g. the demo's
patch); the command line is the benchmark's plus benchmarks.rcutrace.CMDLINE. rcuscale
dumps the trace buffer itself when its writer is done (rcu_ftrace_dump), so the console
holds the dump, which is what the fixtures are: real consoles, never hand-written.
Run: .venv/bin/python scripts/capture_traces.py [--arch x86_64 ppc64le] [--mbox F --label L]
"""

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import rcutrace
from benchmarks.registry import get
from engine.vm.domain import VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import initramfs
from perf.tracing import build
from perf.vm_overhead import TOPOLOGY, URI


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", nargs="+", default=["x86_64"])
    parser.add_argument("--bench", default="sync-rcu-latency")
    parser.add_argument("--mbox", type=Path, help="a series to apply on the base")
    parser.add_argument("--label", default="", help="appended to the fixture's name")
    parser.add_argument(
        "--untraced", action="store_true",
        help="the same kernel with no event enabled: a verdict run's console",
    )  # fmt: skip
    args = parser.parse_args()
    bench = get(args.bench)
    for arch in args.arch:
        built = build(arch, tracing=True, mbox=args.mbox)
        print(f"{arch}: kernel {built.key} ({'cached' if built.cached else 'built'})")
        cmdline = (
            bench.spec.cmdline if args.untraced else f"{bench.spec.cmdline} {rcutrace.CMDLINE}"
        )
        with tempfile.TemporaryDirectory(prefix="rcubench-capture-", dir="/var/tmp") as tmp:
            Path(tmp).chmod(0o755)
            spec = VMSpec(
                name=new_domain_name("trace"), arch=arch, kernel=built.image,
                initrd=initramfs(arch), cmdline=cmdline,
                console_log=Path(tmp) / "console.log",
                **TOPOLOGY[arch],  # type: ignore[arg-type]
            )  # fmt: skip
            out = run_vm(URI, spec, boot_timeout=300, run_timeout=600)
        label = f"-{args.label}" if args.label else ""
        dest = (
            ROOT / "benchmarks" / "rcutrace" / "fixtures" / f"{arch}-{spec.machine}-tcg{label}.log"
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(out.console)
        print(f"{arch}: {out.outcome} ({out.reason}), {out.wall_seconds:.1f} s, "
              f"{len(out.console)} chars -> {dest}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
