"""Per-run overhead of rcubench's VM runner against a bare QEMU boot, side by side.

Both boot the same kernel and initramfs with the same command line (sync-rcu-latency:
rcuscale runs 100 grace periods and powers off), interleaved A B B A ... in one run so
drift in machine load hits both alike. Wall time per boot, host clock:
    runner  engine.vm.runner.run_vm through libvirt (define, start, watch console, destroy)
    bare    qemu-system-* -kernel ... -nographic -no-reboot, until QEMU exits (the same
            emulator, firmware and machine options as the domain)
Target (issue 4): median(runner) / median(bare) <= 1.15 per arch.
Run: .venv/bin/python perf/vm_overhead.py [--boots 10] [--arch x86_64 ppc64le]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.registry import get
from engine.run.outcomes import OK
from engine.vm.domain import EMULATOR, FIRMWARE, MACHINE_ARGS, VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import initramfs, kernel

URI = "qemu:///system"
TOPOLOGY = {
    "x86_64": {"machine": "pc", "sockets": 1, "cores": 2, "threads": 2, "memory_mb": 512},
    "ppc64le": {"machine": "pseries", "sockets": 1, "cores": 1, "threads": 8, "memory_mb": 1024},
}


def bare_cmd(spec: VMSpec) -> list[str]:
    return [
        EMULATOR[spec.arch], "-accel", "tcg,thread=multi",
        *(["-bios", FIRMWARE[spec.arch]] if spec.arch in FIRMWARE else []),
        "-M", ",".join([spec.machine, *filter(None, [MACHINE_ARGS.get(spec.arch)])]),
        "-m", str(spec.memory_mb),
        "-smp", f"{spec.cpus},sockets={spec.sockets},cores={spec.cores},threads={spec.threads}",
        "-nographic", "-no-reboot", "-kernel", str(spec.kernel), "-initrd", str(spec.initrd),
        "-append", spec.full_cmdline,
    ]  # fmt: skip


def one_runner(spec: VMSpec) -> float:
    started = time.monotonic()
    out = run_vm(URI, spec, boot_timeout=300, run_timeout=300)
    took = time.monotonic() - started
    if out.outcome != OK or "writer-duration" not in out.console:
        raise SystemExit(f"runner boot failed: {out.outcome} {out.reason}")
    return took


def one_bare(spec: VMSpec) -> float:
    started = time.monotonic()
    out = subprocess.run(bare_cmd(spec), capture_output=True, text=True, timeout=600, check=False)
    took = time.monotonic() - started
    if out.returncode != 0 or "writer-duration" not in out.stdout:
        raise SystemExit(f"bare boot failed ({out.returncode}): {out.stderr[-500:]}")
    return took


def measure(arch: str, boots: int) -> tuple[list[float], list[float]]:
    image = kernel(arch).image
    initrd = initramfs(arch)
    cmdline = get("sync-rcu-latency").spec.cmdline
    runner: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rcubench-perf-vm-", dir="/var/tmp") as tmp:
        Path(tmp).chmod(0o755)
        for i in range(boots):
            spec = VMSpec(
                name=new_domain_name("perf"), arch=arch, kernel=image, initrd=initrd,
                cmdline=cmdline, console_log=Path(tmp) / f"console-{i}.log",
                **TOPOLOGY[arch],  # type: ignore[arg-type]
            )  # fmt: skip
            pair = [(runner, one_runner), (bare, one_bare)]
            for times, fn in pair if i % 2 == 0 else reversed(pair):  # A B, B A, ...
                times.append(fn(spec))
    return runner, bare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boots", type=int, default=10)
    parser.add_argument("--arch", nargs="+", default=["x86_64", "ppc64le"])
    args = parser.parse_args()
    missed = False
    for arch in args.arch:
        runner, bare = measure(arch, args.boots)
        ratio = statistics.median(runner) / statistics.median(bare)
        met = ratio <= 1.15
        missed |= not met
        for name, times in (("runner", runner), ("bare", bare)):
            q = statistics.quantiles(times, n=4)
            print(f"{arch:8} {name:6} median {statistics.median(times):6.2f} s  "
                  f"IQR [{q[0]:.2f}, {q[2]:.2f}]  n={len(times)}")  # fmt: skip
        print(f"{arch:8} runner/bare {ratio:.3f} (target <= 1.15: {'met' if met else 'MISSED'})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
