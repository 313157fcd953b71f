"""Noise floor: each benchmark's primary metric over N boots of one kernel.

One kernel, one image, N fresh VMs per benchmark through rcubench's runner and parsers.
Per boot the primary metric is summarised (median of the samples for latencies, the value
otherwise); the script prints the median over boots and the spread (IQR, min..max, and the
IQR relative to the median), the floor under which no A/B difference can be seen.
Run: .venv/bin/python perf/noise_floor.py [--boots 10] [--arch x86_64] [--bench NAME ...]
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.registry import get
from benchmarks.spec import Kind, RunContext
from engine.run.outcomes import OK
from engine.vm.domain import VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import initramfs, kernel
from perf.vm_overhead import TOPOLOGY, URI

PER_ARCH = {
    "x86_64": ["sync-rcu-latency", "smt-toggle", "boot-time", "bpf-slab"],
    "ppc64le": ["sync-rcu-latency", "smt-toggle", "boot-time", "bpf-slab"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boots", type=int, default=10)
    parser.add_argument("--arch", nargs="+", default=["x86_64", "ppc64le"])
    parser.add_argument("--bench", nargs="+", metavar="NAME",
                        help="these benchmarks (presets too), not the arch's list")  # fmt: skip
    args = parser.parse_args()
    for arch in args.arch:
        image, initrd = kernel(arch).image, initramfs(arch)
        for name in args.bench or PER_ARCH[arch]:
            bench = get(name)
            metric = bench.spec.primary
            values = []
            with tempfile.TemporaryDirectory(prefix="rcubench-noise-", dir="/var/tmp") as tmp:
                Path(tmp).chmod(0o755)
                for i in range(args.boots):
                    spec = VMSpec(
                        name=new_domain_name("noise"), arch=arch, kernel=image, initrd=initrd,
                        cmdline=bench.spec.cmdline, console_log=Path(tmp) / f"c{i}.log",
                        **TOPOLOGY[arch],  # type: ignore[arg-type]
                    )  # fmt: skip
                    out = run_vm(URI, spec, boot_timeout=300, run_timeout=300)
                    if out.outcome != OK:
                        raise SystemExit(f"{arch} {name} boot {i}: {out.outcome} {out.reason}")
                    parsed = bench.parse(
                        out.console, RunContext(out.wall_seconds, out.ready_seconds)
                    )
                    samples = parsed[metric.name]
                    values.append(
                        statistics.median(samples) if metric.kind is Kind.SAMPLES else samples[0]
                    )
            med = statistics.median(values)
            q = statistics.quantiles(values, n=4)
            print(
                f"{arch:8} {name:18} {metric.name:18} median {med:9.3f} {metric.unit:3} "
                f"IQR [{q[0]:.3f}, {q[2]:.3f}] ({(q[2] - q[0]) / med * 100:.1f}% of median) "
                f"min..max [{min(values):.3f}, {max(values):.3f}]  n={len(values)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
