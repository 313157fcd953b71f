"""Traced diagnostic runs, measured (issue 34): what tracing costs and what it shows.

config   A/A of the kernel config: the default tree's benchmark kernel as the workers
         built it before issue 34 (A) against the same with the tracing Kconfig, as they
         build it now (B: benchmarks.rcutrace.KCONFIG, no event enabled), --runs per side
         in ABBA order, untraced; or, with --without LINE..., A without those lines
         (CONFIG_SCHEDSTATS=y: the grace-period kthread's CPU time, issue 37). Per benchmark:
         the primary's run-level Hodges-Lehmann shift with its 95% CI, the Brunner-Munzel
         p, and side A's noise floor (IQR / median of its run values).
phases   traced runs (benchmarks.rcutrace.CMDLINE) of the tracing kernel (A) against the
         same plus --mbox (B; by default the demo's patch; --aa: B is A again), --runs per
         side in ABBA order: the phase table (stats.phases.compare), the share of the
         grace period's change the wait before the first FQS accounts for, the FQS scan
         histograms, the pairing per run, and the wall time of a traced run against an
         untraced one of the same kernel (--untraced of them, interleaved), from which the
         time K traced runs a side add to a 24 + 24 comparison's runs.
Run on an otherwise idle machine (a build or `make test` beside it skews every number):
    .venv/bin/python perf/tracing.py config [--runs 24] [--bench sync-rcu-latency boot-time]
                                            [--without CONFIG_SCHEDSTATS=y]
    .venv/bin/python perf/tracing.py phases [--runs 8] [--aa] [--arch x86_64]
"""

import argparse
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np

from benchmarks import rcutrace
from benchmarks.rcutrace.parser import Trace, parse_console, summary
from benchmarks.registry import BENCHMARKS, get, kconfig_for
from benchmarks.spec import Kind, RunContext
from benchmarks.sync_rcu_latency.parser import DURATION
from engine.build.builder import BuildOutcome, build_kernel
from engine.run.console import RunOutcome
from engine.run.outcomes import OK
from engine.vm.domain import VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import build_settings, initramfs, request
from perf.vm_overhead import TOPOLOGY, URI
from stats.methods import brunner_munzel, hodges_lehmann
from stats.phases import compare, share

DEMO = ROOT / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"


def abba(n: int) -> list[str]:
    """A B B A, repeated: each side's runs spread evenly over the session's drift."""
    return [("A", "B", "B", "A")[i % 4] for i in range(2 * n)]


def build(
    arch: str, tracing: bool, mbox: Path | None = None, without: tuple[str, ...] = ()
) -> BuildOutcome:
    """The benchmark kernel as the workers build it (every build carries the tracing
    Kconfig since issue 34), or, tracing=False, as they built it before: without it; and
    without the `without` lines."""
    fragments = tuple(line for line in kconfig_for(BENCHMARKS) if line not in without)
    if not tracing:
        fragments = tuple(line for line in fragments if line not in rcutrace.KCONFIG)
    req = request(arch, fragments)
    if mbox is not None:
        req = replace(req, mbox=mbox.read_bytes())
    return build_kernel(req, build_settings())


def boot(arch: str, kernel: Path, cmdline: str, tmp: Path, i: int) -> RunOutcome:
    spec = VMSpec(
        name=new_domain_name("perf-trace"), arch=arch, kernel=kernel, initrd=initramfs(arch),
        cmdline=cmdline, console_log=tmp / f"c{i}.log",
        **TOPOLOGY[arch],  # type: ignore[arg-type]
    )  # fmt: skip
    out = run_vm(URI, spec, boot_timeout=300, run_timeout=600)
    if out.outcome != OK:
        raise SystemExit(f"boot {i}: {out.outcome} {out.reason}")
    return out


def primary(name: str, out: RunOutcome) -> float:
    if name == "sync-rcu-latency":
        # The writer's durations alone: a kernel --without CONFIG_SCHEDSTATS=y has no
        # rcuscale window, which the benchmark's parser refuses (benchmarks/guest.py).
        durations = [int(m.group("ns")) / 1e6 for m in DURATION.finditer(out.console)]
        if len(durations) < 100:
            raise SystemExit(f"{len(durations)} writer-duration lines: {out.reason}")
        return statistics.median(durations)
    bench = get(name)
    metric = bench.spec.primary
    samples = bench.parse(out.console, RunContext(out.wall_seconds, out.ready_seconds))[metric.name]
    return statistics.median(samples) if metric.kind is Kind.SAMPLES else samples[0]


def config(args: argparse.Namespace) -> None:
    if args.without and not set(args.without) <= set(kconfig_for(BENCHMARKS)):
        raise SystemExit(f"--without {' '.join(args.without)}: not all in the benchmarks' Kconfig")
    without = tuple(args.without)
    side_a = build(args.arch, True, without=without) if without else build(args.arch, False)
    kernels = {"A": side_a.image, "B": build(args.arch, True).image}
    for name in args.bench:
        values: dict[str, list[float]] = {"A": [], "B": []}
        with tempfile.TemporaryDirectory(prefix="rcubench-trace-", dir="/var/tmp") as tmp:
            Path(tmp).chmod(0o755)
            for i, side in enumerate(abba(args.runs)):
                out = boot(args.arch, kernels[side], get(name).spec.cmdline, Path(tmp), i)
                values[side].append(primary(name, out))
        a, b = values["A"], values["B"]
        shift = hodges_lehmann(a, b)
        p = brunner_munzel(a, b, rng=np.random.default_rng(0)).p_value
        q1, _, q3 = statistics.quantiles(a, n=4)
        print(
            f"{args.arch} {name} ({get(name).spec.primary.name}, run medians): "
            f"A {statistics.median(a):.4g}, B {statistics.median(b):.4g}; "
            f"HL B vs A {shift.estimate:+.2f}% [{shift.low:+.2f}, {shift.high:+.2f}], "
            f"p {p:.3f}; A's noise floor (IQR/median) {100 * (q3 - q1) / statistics.median(a):.2f}%"
        )


def phases(args: argparse.Namespace) -> None:
    base = build(args.arch, True)
    other = base if args.aa else build(args.arch, True, args.mbox)
    cmd = get("sync-rcu-latency").spec.cmdline
    traces: dict[str, list[Trace]] = {"A": [], "B": []}
    walls: dict[str, list[float]] = {"traced": [], "untraced": []}
    with tempfile.TemporaryDirectory(prefix="rcubench-trace-", dir="/var/tmp") as tmp:
        Path(tmp).chmod(0o755)
        for i, side in enumerate(abba(args.runs)):
            kernel = (base if side == "A" else other).image
            out = boot(args.arch, kernel, f"{cmd} {rcutrace.CMDLINE}", Path(tmp), i)
            traces[side].append(parse_console(out.console))
            walls["traced"].append(out.wall_seconds)
            if i < args.untraced:  # the same kernel untraced, right after: the time it costs
                again = boot(args.arch, kernel, cmd, Path(tmp), 10_000 + i)
                walls["untraced"].append(again.wall_seconds)
    for side, ts in traces.items():
        for t in ts:
            print(
                f"{side}: {len(t.window)}/{t.test_gps} window GPs, paired "
                f"{100 * t.paired_share:.1f}%, lost events {t.lost_events}, usable {t.usable}"
            )
    a = [summary(t) for t in traces["A"]]
    b = [summary(t) for t in traces["B"]]
    label = "A/A" if args.aa else f"base vs base + {args.mbox.name}"
    print(f"\n{args.arch} {label}, {args.runs} traced runs a side (ms; fqs_scans per GP)")
    rows = compare(a, b)
    print(f"{'phase':<28}{'A':>9}{'B':>9}{'B - A [95% CI]':>30}{'q (BH)':>9}  flagged")
    for r in rows:
        ci = f"{r.shift:+.3f} [{r.low:+.3f}, {r.high:+.3f}]"
        print(
            f"{r.phase:<28}{r.median_a:>9.3f}{r.median_b:>9.3f}{ci:>30}{r.q_value:>9.3g}  "
            f"{'yes' if r.flagged else 'no'}"
        )
    moved = any(r.phase == "gp_duration" and r.flagged for r in rows)
    s = share(a, b, "gp_first_fqs_wait", "gp_duration") if moved else None
    if not moved:
        print("\nthe grace period's duration did not move: no share of a change to report")
    if s is not None:
        print(
            f"\nthe wait before the first FQS accounts for {100 * s.estimate:.0f}% "
            f"[{100 * s.low:.0f}, {100 * s.high:.0f}] of the change in the median grace period "
            f"({s.resamples} resamples of whole runs)"
        )
    for side, ts in traces.items():
        hist = Counter(g.scans for run in ts for g in run.window)
        print(f"FQS scans per GP, {side}: {dict(sorted(hist.items()))}")
    if walls["untraced"]:
        traced, plain = statistics.median(walls["traced"]), statistics.median(walls["untraced"])
        added = 2 * args.runs * traced / (48 * plain)
        print(
            f"\nwall per run: traced {traced:.2f} s, untraced {plain:.2f} s (medians, "
            f"{len(walls['traced'])} and {len(walls['untraced'])} runs); {args.runs} traced a "
            f"side add {100 * added:.0f}% to a 24 + 24 comparison's run time"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("config")
    c.add_argument("--runs", type=int, default=24)
    c.add_argument("--bench", nargs="+", default=["sync-rcu-latency", "boot-time"])
    c.add_argument("--arch", default="x86_64")
    c.add_argument(
        "--without",
        nargs="+",
        default=[],
        metavar="LINE",
        help="side A: the kernel without these Kconfig lines (default: tracing's)",
    )
    p = sub.add_parser("phases")
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--untraced", type=int, default=8)
    p.add_argument("--aa", action="store_true")
    p.add_argument("--mbox", type=Path, default=DEMO)
    p.add_argument("--arch", default="x86_64")
    args = parser.parse_args()
    if args.what == "config":
        config(args)
    else:
        phases(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
