"""The lab runner's own overhead per run on the stand-in (issue 19), against the benchmark.

Each run is what a lab worker does (engine/lab/runner.py): ssh connect, copy the kernel
and initramfs to the host's tmpfs (sha256-checked; every run copies both, as nothing of an
earlier run stays on the host), kexec -l, then kexec -e and the kernel under test running
the benchmark to its end (`kernel`, the part a VM run also has), then bringing the host
back to its known-good kernel (`restore`: the restart, the host's firmware and known-good
boot, until sshd answers with a new boot id). Printed: the median and range of each phase
over the runs, and the ratios overhead / kernel, with overhead = connect + copy + load +
restore. The stand-in here is a trusted-only host (no re-image).

The stand-in is a TCG guest (vm-images/lab-standin.sh), so its known-good boot is far
slower than a real machine's kernel boot, but a real lab host adds firmware (POST) time
that the stand-in does not have: read `restore` as this machine's figure, not a lab's.

Run: .venv/bin/python perf/lab_overhead.py [--runs 10] [--bench sync-rcu-latency]
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
from engine.lab.runner import LabJob, restore, run_lab
from engine.lab.tests.standin import IMAGE_DIR, SCRIPT, _free_port, standin_host
from engine.run.outcomes import OK
from perf._kernels import initramfs, kernel

CMDLINE = "console=ttyS0 panic=-1 rcubench.end=reboot"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--bench", default="sync-rcu-latency")
    args = parser.parse_args()
    bench = get(args.bench)
    image, initrd = kernel("x86_64").image, initramfs("x86_64")
    subprocess.run(["/bin/bash", str(SCRIPT), "build", str(IMAGE_DIR)], check=True)
    name = "rcubench-lab-perf"
    ssh_port, console_port = _free_port(), _free_port()
    script = ["/bin/bash", str(SCRIPT)]
    subprocess.run([*script, "define", name, str(ssh_port), str(console_port)], check=True)
    phases: dict[str, list[float]] = {k: [] for k in ("connect", "copy", "load", "kernel",
                                                       "restore", "overhead")}  # fmt: skip
    try:
        subprocess.run([*script, "wait-ssh", str(ssh_port), "300"], check=True)
        host = standin_host(name, ssh_port, console_port)
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                job = LabJob(image, initrd, f"{CMDLINE} {bench.spec.cmdline}",
                             Path(tmp) / f"console-{i}.log")  # fmt: skip
                lab = run_lab(host, job, boot_timeout=120, run_timeout=300)
                if lab.outcome.outcome != OK:
                    print(f"run {i}: {lab.outcome.outcome}: {lab.outcome.reason}")
                    return 1
                started = time.monotonic()
                back = restore(host, lab.ending, tries=1, boot_id=lab.boot_id)
                if not back.returned:
                    print(f"run {i}: the host did not come back: {back.reason}")
                    return 1
                took = {**vars(lab.phases), "restore": time.monotonic() - started}
                took["overhead"] = sum(took[k] for k in ("connect", "copy", "load", "restore"))
                for key, value in took.items():
                    phases[key].append(value)
                print(f"run {i}: " + "  ".join(f"{k} {v:.2f}" for k, v in took.items()),
                      flush=True)  # fmt: skip
    finally:
        subprocess.run([*script, "undefine", name], check=False)
    print(f"\n{args.bench} on the stand-in, {args.runs} runs (seconds: median [min, max])")
    for key, values in phases.items():
        print(
            f"  {key:9s} {statistics.median(values):7.2f}  [{min(values):.2f}, {max(values):.2f}]"
        )
    kernel_s = statistics.median(phases["kernel"])
    print(f"  overhead / kernel, medians: {statistics.median(phases['overhead']) / kernel_s:.2f}")
    setup = [sum(x) for x in zip(phases["connect"], phases["copy"], phases["load"], strict=True)]
    print(f"  ssh + copy + kexec -l / kernel (no restore), medians: "
          f"{statistics.median(setup) / kernel_s:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
