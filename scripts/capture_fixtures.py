"""Boot each benchmark once on the default tree's kernel and save the raw console as a
parser fixture: benchmarks/<bench>/fixtures/<arch>-<machine>-tcg.log.

The fixtures are real consoles, never hand-written; rerun this after changing a guest
program or the output protocol, then check the parser tests.
Run: .venv/bin/python scripts/capture_fixtures.py [--arch x86_64 ppc64le] [--bench NAME ...]
     [--kernel IMAGE]   boot this built benchmark kernel (one arch) instead of building one
A preset's console is named after it: sync-rcu-latency--many-writers's is
benchmarks/sync_rcu_latency/fixtures/x86_64-pc-tcg--many-writers.log.
"""

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.registry import BENCHMARKS, get
from engine.vm.domain import VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import initramfs, kernel
from perf.vm_overhead import TOPOLOGY, URI


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", nargs="+", default=["x86_64"])
    parser.add_argument("--bench", nargs="+", default=list(BENCHMARKS))
    parser.add_argument(
        "--kernel", type=Path, help="a built benchmark kernel's image (with one --arch)"
    )
    args = parser.parse_args()
    if args.kernel and len(args.arch) != 1:
        parser.error("--kernel boots one arch's kernel: give one --arch")
    for arch in args.arch:
        image = args.kernel or kernel(arch).image
        initrd = initramfs(arch)
        for name in args.bench:
            bench = get(name)
            with tempfile.TemporaryDirectory(prefix="rcubench-capture-", dir="/var/tmp") as tmp:
                Path(tmp).chmod(0o755)
                spec = VMSpec(
                    name=new_domain_name("capture"), arch=arch, kernel=image, initrd=initrd,
                    cmdline=bench.spec.cmdline, console_log=Path(tmp) / "console.log",
                    **TOPOLOGY[arch],  # type: ignore[arg-type]
                )  # fmt: skip
                out = run_vm(URI, spec, boot_timeout=300, run_timeout=300)
            # The folder of the package whose parser the benchmark uses (a variant such as
            # sync-rcu-latency-exp shares its base's), the variant named in the file.
            package = bench.parse.__module__.split(".")[1]
            suffix = name.removeprefix(package.replace("_", "-"))
            dest = (
                ROOT
                / "benchmarks"
                / package
                / "fixtures"
                / f"{arch}-{spec.machine}-tcg{suffix}.log"
            )
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(out.console)
            print(
                f"{arch} {name}: {out.outcome} ({out.reason}), {out.wall_seconds:.1f} s "
                f"(ready {out.ready_seconds}) -> {dest}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
