"""Grace periods in whole jiffies, measured on real boots (issue 32, STATS.md v3).

Two questions, one run of interleaved boots through rcubench's own runner (run_vm on
qemu:///system, the default qemu-x86_64 target, sync-rcu-latency's command line):
  1. The boot effect: the dispersion index D = var(X_i) / (n p (1 - p)) of the per-boot
     counts X_i of grace periods above the modal jiffy count, over every boot of the
     default kernel (D ~ 1: binomial sampling alone; D >> 1: something decided per boot).
     STATS.md v3 puts sync-rcu-latency's tail share on the D <= 1.5 branch or the D > 1.5
     one by this figure.
  2. A known move: the same kernel plus perf/fixtures/0001-rcu-fqs-every-67th.mbox, where
     every grace period whose counter is a multiple of 67 (1.49%) waits one jiffy more
     before its first force-quiescent-state scan (kernel/rcu/tree.c rcu_gp_fqs_loop), so
     it ends one jiffy later. The engine (stats.battery.analyse, the default Design, the
     benchmark's own metric) compares default against it look by look (24, 48, 72, 96
     runs per side) as a comparison would, and a second default side against the first
     as a real A/A (its first --aa-boots rounds).

Configurations, booted once per round from a rotating start so drift hits all alike:
    default       the workers' kernel (every benchmark's Kconfig) at the default base
    default-aa    the same kernel again: the A/A's second side (first --aa-boots rounds)
    fqs67         default + the patch above
Every boot's writer_duration samples go to --json, and --from-json re-analyses a stored
run without booting (the boots need a quiet host; the analysis does not).

Run (as root, libvirtd up):
    .venv/bin/python perf/jiffy_measurement.py [--boots 96] [--aa-boots 48] [--json f]
    .venv/bin/python perf/jiffy_measurement.py --from-json f
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.spec import Better
from engine.build import kconfig
from engine.build.builder import BuildOutcome, build_kernel
from engine.run.outcomes import OK
from perf._kernels import build_settings, initramfs, request
from perf.quiet_measurement import (
    ARCH,
    BENCH,
    DEFAULT,
    METRIC,
    Config,
    Topology,
    boot_and_parse,
)
from stats import jiffies
from stats.battery import analyse
from stats.design import Design
from stats.inputs import MetricInput, RunSamples

PATCH = Path(__file__).with_name("fixtures") / "0001-rcu-fqs-every-67th.mbox"
MOVED_SHARE = 1 / 67  # the grace periods the patch delays, from its code
HZ = 1000  # the default configs' CONFIG_HZ (engine/build/configs); checked on the build
CONFIGS = ("default", "default-aa", "fqs67")
SHOWN = ("p50", jiffies.TAIL_SHARE, jiffies.CAPPED_MEAN)


@dataclass
class Boot:
    config: str
    round: int
    outcome: str
    reason: str
    wall_seconds: float
    host_busy: float | None
    samples_ms: list[float]


def kernels() -> dict[str, BuildOutcome]:
    base = request(ARCH)
    built = {
        "default": build_kernel(base, build_settings()),
        "fqs67": build_kernel(replace(base, mbox=PATCH.read_bytes()), build_settings()),
    }
    for name, out in built.items():
        hz = _config_hz(out)
        if hz != HZ:
            raise SystemExit(f"{name}: CONFIG_HZ={hz}, this script counts jiffies of 1/{HZ} s")
        print(f"kernel {name:8} {'cached' if out.cached else 'built'} {out.sha[:12]} {out.image}")
    return built


def _config_hz(out: BuildOutcome) -> int | None:
    return kconfig.hz(kconfig.parse((out.artifact_dir / "config").read_text()))


def boot(cfg: Config, image: Path, initrd: Path, tmp: Path, rnd: int) -> Boot:
    b = boot_and_parse(cfg, image, initrd, tmp, rnd)
    return Boot(cfg.name, rnd, b.outcome, b.reason, b.wall_seconds, b.host_busy, b.samples or [])


# --cause: the default kernel booted as the default target does, and with one thing changed:
# no more vCPUs than this host has cores (4 vCPU threads share 2 cores by default, so a
# vCPU can be off the host CPU while its grace period waits on it), or the tick kept on
# idle CPUs (nohz=off: an idle vCPU is not in dyntick-idle, so no FQS scan has to find it).
CAUSES = {
    "default": Config("default", "all", "shared", DEFAULT),
    "default+2-vcpus": Config("default+2-vcpus", "all", "shared",
                              Topology(DEFAULT.machine, 1, 2, 1, DEFAULT.memory_mb)),
    "default+nohz-off": Config("default+nohz-off", "all", "shared", DEFAULT, "nohz=off"),
}  # fmt: skip


def measure(
    boots: int, aa_boots: int, images: dict[str, Path], initrd: Path, cause: bool = False
) -> list[Boot]:
    done: list[Boot] = []
    kernel_of = {"default": "default", "default-aa": "default", "fqs67": "fqs67"}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rcubench-jiffy-", dir="/var/tmp") as tmp:
        Path(tmp).chmod(0o755)
        for rnd in range(boots):
            names = ["default", "fqs67"] + (["default-aa"] if rnd < aa_boots else [])
            if cause:
                names = list(CAUSES)
            shift = rnd % len(names)
            for name in names[shift:] + names[:shift]:
                cfg = CAUSES[name] if cause else Config(name, "all", "shared", DEFAULT)
                b = boot(cfg, images[kernel_of.get(name, "default")], initrd, Path(tmp), rnd)
                done.append(b)
                got = f"{len(b.samples_ms)} GPs" if b.samples_ms else f"{b.outcome}: {b.reason}"
                print(f"  round {rnd + 1}/{boots} {name:10} {b.wall_seconds:5.1f} s  {got}",
                      file=sys.stderr, flush=True)  # fmt: skip
    return done


def _jiffies(b: Boot) -> np.ndarray:
    return jiffies.quantise(b.samples_ms, jiffies.jiffy_ms(HZ))


def metric(runs_a: list[Boot], runs_b: list[Boot]) -> MetricInput:
    """writer_duration as a comparison gives it to the engine (webapp/analysis/services.py
    metric_inputs): the benchmark's own declaration, HZ from the builds."""
    m = next(x for x in BENCH.spec.metrics if x.name == METRIC)
    return MetricInput(
        benchmark=BENCH.spec.name, name=m.name, unit=m.unit, per_run_samples=True,
        lower_is_better=m.better is Better.LOWER, primary=m.primary,
        runs_a=[RunSamples(2 * i, tuple(b.samples_ms)) for i, b in enumerate(runs_a)],
        runs_b=[RunSamples(2 * i + 1, tuple(b.samples_ms)) for i, b in enumerate(runs_b)],
        threshold=m.threshold, jiffy_ms=jiffies.jiffy_ms(HZ),
        tail_share_primary=m.tail_share_primary,
    )  # fmt: skip


def sequential(label: str, a: list[Boot], b: list[Boot]) -> None:
    """The engine on A vs B look by look, as a comparison's looks would see the runs (in
    boot order), until it needs no more runs or the boots run out."""
    design = Design()
    print(f"\n{label}: A {len(a)} boots, B {len(b)} boots; looks {design.looks}")
    for n in design.looks:
        if min(len(a), len(b)) < n:
            print(f"  look at {n}: not reached ({min(len(a), len(b))} boots a side)")
            return
        analysis = analyse([metric(a[:n], b[:n])], design)
        for r in analysis.results:
            if r.statistic in SHOWN:
                ci = ("" if r.ci_low is None or r.ci_high is None
                      else f" CI [{r.ci_low:+.2f}, {r.ci_high:+.2f}]")  # fmt: skip
                shift = "n/a" if r.shift is None else f"{r.shift:+.2f}"
                role = "primary" if r.is_primary else "second."
                print(f"  look {analysis.look} (n={n}) {r.statistic:11} {role:7} "
                      f"A {r.median_a:7.3f} B {r.median_b:7.3f} shift {shift}{ci} "
                      f"p {r.p_value:.2e} boundary {r.details.get('boundary', float('nan')):.2e} "
                      f"-> {r.verdict}{' (pending)' if r.pending else ''}")  # fmt: skip
        print(f"  look {analysis.look}: comparison verdict {analysis.verdict}, "
              f"need {analysis.need_more_runs} more runs a side")  # fmt: skip
        if analysis.need_more_runs == 0:
            return


def report_causes(boots: list[Boot]) -> None:
    """D and the share above the mode per configuration of --cause."""
    ok = [b for b in boots if b.outcome == OK]
    print(f"\n{len(boots)} boots, {len(ok)} ok")
    for name in CAUSES:
        mine = [_jiffies(b) for b in ok if b.config == name]
        if len(mine) < 2:
            continue
        d = jiffies.dispersion(mine)
        busy = [b.host_busy for b in boots if b.config == name and b.host_busy is not None]
        long = float(np.mean(np.concatenate(mine) >= d.mode + 2)) * 100
        index = "undefined" if d.index is None else f"{d.index:.2f}"
        print(f"  {name:18} {d.boots:3} boots, mode {d.mode} jiffies, above it "
              f"{d.share_above * 100:5.2f}% (>= mode + 2: {long:5.2f}%), D {index}, "
              f"busy median {statistics.median(busy) if busy else float('nan'):.2f}")  # fmt: skip
        sh = jiffies.shares(mine)
        print("      " + " ".join(f"{k}:{v * 100:.2f}%" for k, v in sh.items() if v >= 0.001))


def report(boots: list[Boot]) -> None:
    ok = [b for b in boots if b.outcome == OK]
    by = {c: [b for b in ok if b.config == c] for c in CONFIGS}
    busy = [b.host_busy for b in boots if b.host_busy is not None]
    failed = Counter(f"{b.config} {b.outcome}" for b in boots if b.outcome != OK)
    print(f"\n{len(boots)} boots, {len(ok)} ok, failed: {dict(failed) or 'none'}")
    if busy:
        print(f"host busy share during boots: median {statistics.median(busy):.2f}, "
              f"max {max(busy):.2f} (others' share of the host's CPUs)")  # fmt: skip
    pooled = jiffies.pooled_mode([_jiffies(b) for b in ok])
    print(f"pooled modal jiffy count {pooled}; share of samples at each count, per configuration:")
    for name, mine in by.items():
        if mine:
            sh = jiffies.shares([_jiffies(b) for b in mine])
            gps = statistics.median(len(b.samples_ms) for b in mine)
            print(f"  {name:10} {len(mine):3} boots, {gps:.0f} GPs a boot: "
                  + " ".join(f"{k}:{v * 100:.2f}%" for k, v in sh.items()))  # fmt: skip
    # 1. D over every boot of the default kernel (both default sides: one kernel).
    base = by["default"] + by["default-aa"]
    d = jiffies.dispersion([_jiffies(b) for b in base])
    counts = sorted(int(np.sum(_jiffies(b) > d.mode)) for b in base)
    branch = ("D <= 1.5: the 1.5-point target applies" if d.boot_level is False
              else "D > 1.5: a boot-level effect; report the achievable move")  # fmt: skip
    index = "undefined" if d.index is None else f"{d.index:.2f}"
    p = "n/a" if d.p_value is None else f"{d.p_value:.2g}"
    print(f"\nD (default kernel, {d.boots} boots, {d.samples} GPs, mode {d.mode} jiffies, "
          f"share above {d.share_above * 100:.2f}%): {index} (chi-square p for D = 1: {p}) -> "
          f"{branch}")  # fmt: skip
    print(f"  per-boot counts above the mode: min {counts[0]}, median "
          f"{statistics.median(counts):g}, max {counts[-1]}")  # fmt: skip
    if by["fqs67"]:
        d67 = jiffies.dispersion([_jiffies(b) for b in by["fqs67"]])
        print(f"D (fqs67 kernel, {d67.boots} boots): "
              f"{'undefined' if d67.index is None else f'{d67.index:.2f}'}")  # fmt: skip
    # 2. The engine, look by look.
    sequential("A/A: default vs default-aa (same kernel)", by["default"], by["default-aa"])
    sequential(f"known move: default vs fqs67 ({MOVED_SHARE * 100:.2f}% of GPs one jiffy later)",
               by["default"], by["fqs67"])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boots", type=int, default=96, help="rounds (default, fqs67 each)")
    parser.add_argument("--aa-boots", type=int, default=48, help="rounds with a default-aa boot")
    parser.add_argument("--json", type=Path, help="write every boot's samples here")
    parser.add_argument("--from-json", type=Path, help="analyse a stored run, boot nothing")
    parser.add_argument("--build-only", action="store_true")
    what = ", ".join(CAUSES)
    parser.add_argument("--cause", action="store_true",
                        help=f"boot the default kernel as {what} instead: D of each")  # fmt: skip
    args = parser.parse_args()
    if args.from_json:
        boots = [Boot(**b) for b in json.loads(args.from_json.read_text())]
        (report_causes if any(b.config in CAUSES and b.config != "default" for b in boots)
         else report)(boots)  # fmt: skip
        return 0
    started = time.monotonic()
    built = kernels()
    initrd = initramfs(ARCH)
    if args.build_only:
        return 0
    images = {k: o.image for k, o in built.items()}
    boots = measure(args.boots, args.aa_boots, images, initrd, cause=args.cause)
    took = time.monotonic() - started
    print(f"{len(boots)} boots in {took:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([asdict(b) for b in boots]))
    (report_causes if args.cause else report)(boots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
