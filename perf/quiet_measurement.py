"""A quieter sync-rcu-latency measurement (issue 15): what rcubench boots, varied.

A patch shortening tail grace-period latency by ~1% was found at 24 runs per side by a bare
boot loop of a minimal kernel and initramfs, and stayed inconclusive in rcubench. On one and
the same kernel and initramfs rcubench's runner and a bare QEMU boot measure alike, so the
noise is in *what* rcubench boots: a kernel with every benchmark's Kconfig, one initramfs
for all benchmarks, the default target's topology and memory. Each configuration below
changes one of these; each boots its kernel N times through rcubench's own runner (run_vm
on qemu:///system, one VM at a time) and its console is read by the sync-rcu-latency parser.

Configurations (x86_64; kernels built through the workers' build engine, so the build cache
and ccache are shared with them):
    default             every benchmark's Kconfig, the shared initramfs, the default
                        qemu-x86_64 target (pc, 1 socket x 2 cores x 2 threads, 1024 MiB),
                        the benchmark's command line: what a comparison boots today
    default+...         the default kernel and initramfs with a variant below
    bench-kernel        only sync-rcu-latency's Kconfig (on the builder's arch base)
    ...+idle-init       an initramfs whose /init (perf/idle_init.c) only pause()s
    ...+small-target    1 socket x 2 cores x 1 thread, 256 MiB: no more vCPUs than host
                        cores (the default's 4 vCPU threads share this host's 2 cores)
    ...+4-sockets       4 sockets x 1 core x 1 thread, 1024 MiB (the variant tried in issue 15)
    ...+long-run        rcuscale.minruntime=3: ~4x the grace periods per boot
Boots are interleaved (round r boots every configuration once, starting at a rotating
position), so drift in the host's load hits all of them alike: compare configurations
only within one run of this script.

Per configuration it prints: boots (ok/failed), the median share of the host's CPUs that
other work used during a boot ("busy", from the runner's host monitor: near 0 on a quiet
host), median boot wall time (host clock, domain defined to destroyed), median grace
periods per boot, median of the per-run mean and p90 (ms), the run-to-run CV (SD of the
logs of the per-run values, %) of the per-run mean, p90 and p50 of writer_duration (as
stats.inputs.run_values computes them), and the engine's smallest detectable
shift (sequential.smallest_detectable_shift, 80% power, at the last look's boundary
Design().alpha_at(last look)) at 24 and 96 runs per side. Then CV ratios against `default`
and a PASS/FAIL line per configuration for the target: SDS of the mean and of the p90
<= 1% at 96 runs per side. An SD estimated from n boots is itself uncertain by about
1/sqrt(2(n-1)) (15% at 24 boots, 7% at 96): use enough boots, on a quiet host.

Run (as root, libvirtd up: `make up`); the kernels are built first if not cached:
    .venv/bin/python perf/quiet_measurement.py [--boots 24] [--only default bench-kernel ...]
        [--json boots.json] [--build-only]
Boot progress goes to stderr, the tables to stdout; --json keeps every boot's values.
"""

import argparse
import hashlib
import importlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.registry import BENCHMARKS, get, kconfig_for
from benchmarks.spec import ParseError, RunContext
from engine.build.arch import profile
from engine.build.builder import BuildOutcome
from engine.run.outcomes import OK
from engine.vm.domain import VMSpec
from engine.vm.runner import new_domain_name, run_vm
from perf._kernels import DATA, initramfs, kernel
from perf.vm_overhead import URI
from stats import sequential
from stats.design import Design
from stats.inputs import RunSamples, run_values

ARCH = "x86_64"
BENCH = get("sync-rcu-latency")
METRIC = "writer_duration"
STATISTICS = ("mean", "p90", "p50")
TARGET_SDS_PCT = 1.0  # issue 15: SDS of the per-run mean and p90 at 96 runs per side
TARGET_RUNS = 96
SDS_RUNS = (24, 96)
MIN_BOOTS = 24  # fewer boots give a CV too uncertain (> 15%) for a PASS/FAIL to mean much
LONG_RUN = "rcuscale.minruntime=3"  # the writer runs >= 3 s (and >= 100 grace periods)
IDLE_INIT = Path(__file__).with_name("idle_init.c")


@dataclass(frozen=True)
class Topology:
    machine: str
    sockets: int
    cores: int
    threads: int
    memory_mb: int

    def __str__(self) -> str:
        return f"{self.machine} {self.sockets}x{self.cores}x{self.threads} {self.memory_mb} MiB"


def default_target() -> Topology:
    """The qemu-x86_64 target every deployment starts with, from its migration."""
    migration = importlib.import_module("webapp.comparisons.migrations.0002_default_targets")
    (fields,) = [t for t in migration.TARGETS if t["name"] == f"qemu-{ARCH}"]
    return Topology(*(fields[k] for k in ("machine", "sockets", "cores", "threads", "memory_mb")))


DEFAULT = default_target()
SMALL = Topology("pc", 1, 2, 1, 256)
FOUR_SOCKETS = Topology("pc", 4, 1, 1, 1024)


@dataclass(frozen=True)
class Config:
    name: str
    kernel: str  # "all": every benchmark's Kconfig; "bench": sync-rcu-latency's only
    init: str  # "shared": the workers' initramfs; "idle": perf/idle_init.c alone
    topology: Topology
    extra: str = ""  # appended to the benchmark's command line

    @property
    def cmdline(self) -> str:
        return f"{BENCH.spec.cmdline} {self.extra}".strip()


CONFIGS = (
    Config("default", "all", "shared", DEFAULT),
    Config("default+small-target", "all", "shared", SMALL),
    Config("default+long-run", "all", "shared", DEFAULT, LONG_RUN),
    Config("default+small-target+long-run", "all", "shared", SMALL, LONG_RUN),
    Config("bench-kernel", "bench", "shared", DEFAULT),
    Config("bench-kernel+idle-init", "bench", "idle", DEFAULT),
    Config("bench-kernel+idle-init+small-target", "bench", "idle", SMALL),
    Config("bench-kernel+idle-init+4-sockets", "bench", "idle", FOUR_SOCKETS),
    Config("bench-kernel+idle-init+long-run", "bench", "idle", DEFAULT, LONG_RUN),
    Config("bench-kernel+idle-init+small-target+long-run", "bench", "idle", SMALL, LONG_RUN),
)
FRAGMENTS: dict[str, tuple[str, ...]] = {
    "all": kconfig_for(BENCHMARKS),  # perf._kernels' default, as the workers build
    "bench": kconfig_for([BENCH.spec.name]),
}


@dataclass
class Boot:
    config: str
    round: int
    outcome: str
    reason: str
    wall_seconds: float  # host clock around run_vm: domain defined to destroyed
    gps: int = 0
    values: dict[str, float] | None = None  # per-run statistic -> ms; None: no data
    host_busy: float | None = None  # others' share of the host's CPUs during the boot


# -- images ------------------------------------------------------------------------------


def idle_initramfs(arch: str, cache_dir: Path) -> Path:
    """An initramfs holding only /init built from perf/idle_init.c (static), cached under
    the hash of the source and the compiler; packed as engine.vm.images packs its own
    (sorted names, mtimes 0, owner 0:0, cpio --reproducible, gzip -n)."""
    cc = profile(arch).cc
    key = hashlib.sha256(
        f"{arch}\n{profile(arch).toolchain()}\n".encode() + IDLE_INIT.read_bytes()
    ).hexdigest()
    out = cache_dir / arch / f"idle-initramfs-{key[:16]}.cpio.gz"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cpio, gzip = (shutil.which(tool) for tool in ("cpio", "gzip"))
    if not cpio or not gzip:
        raise SystemExit("cpio and gzip are needed to pack the idle initramfs")
    with tempfile.TemporaryDirectory(prefix="rcubench-idle-initramfs-") as tmp:
        root = Path(tmp) / "root"
        (root / "dev").mkdir(parents=True)
        flags = ["-static", "-Os", "-Wall", "-Werror"]
        compiler = shutil.which(cc) or cc
        subprocess.run([compiler, *flags, "-o", str(root / "init"), str(IDLE_INIT)], check=True)
        (root / "init").chmod(0o755)
        names = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        for name in names:
            os.utime(root / name, (0, 0), follow_symlinks=False)
        packed = subprocess.run(
            [cpio, "--quiet", "--reproducible", "-o", "-H", "newc", "-R", "0:0"],
            cwd=root,
            input="".join(f"{n}\n" for n in names).encode(),
            capture_output=True,
            check=True,
        ).stdout
        tmp_out = out.with_name(f".{out.name}.tmp")
        with open(tmp_out, "wb") as f:
            subprocess.run([gzip, "-n", "-9"], input=packed, stdout=f, check=True)
        tmp_out.rename(out)
    return out


def build_kernels(configs: Sequence[Config]) -> dict[str, BuildOutcome]:
    """Each kernel the configurations need, one at a time (cached after the first build)."""
    built: dict[str, BuildOutcome] = {}
    for which in dict.fromkeys(c.kernel for c in configs):
        started = time.monotonic()
        out = kernel(ARCH, None if which == "all" else FRAGMENTS[which])
        took = time.monotonic() - started
        print(
            f"kernel {which:5} {'cached' if out.cached else 'built '} in {took:6.1f} s  "
            f"{out.image}",
            flush=True,
        )
        built[which] = out
    return built


def config_options(outcome: BuildOutcome) -> dict[str, str]:
    options: dict[str, str] = {}
    for line in (outcome.artifact_dir / "config").read_text().splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            name, value = line.split("=", 1)
            options[name] = value
    return options


def print_kconfig_difference(built: dict[str, BuildOutcome]) -> None:
    if not {"all", "bench"} <= built.keys():
        return
    a, b = config_options(built["all"]), config_options(built["bench"])
    only_all = sorted(k for k in a if k not in b)
    only_bench = sorted(k for k in b if k not in a)
    changed = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    print(
        f"final .config, all vs bench: {len(only_all)} options only in all, "
        f"{len(only_bench)} only in bench, {len(changed)} with other values"
    )
    for label, names in (
        ("only in all", only_all),
        ("only in bench", only_bench),
        ("changed", changed),
    ):
        if names:
            shown = " ".join(n.removeprefix("CONFIG_") for n in names[:60])
            more = f" (+{len(names) - 60} more)" if len(names) > 60 else ""
            print(f"  {label}: {shown}{more}")


# -- booting -----------------------------------------------------------------------------


def vm_spec(cfg: Config, image: Path, initrd: Path, console_log: Path) -> VMSpec:
    t = cfg.topology
    return VMSpec(
        name=new_domain_name("quiet"),
        arch=ARCH,
        machine=t.machine,
        kernel=image,
        initrd=initrd,
        cmdline=cfg.cmdline,
        sockets=t.sockets,
        cores=t.cores,
        threads=t.threads,
        memory_mb=t.memory_mb,
        console_log=console_log,
    )


@dataclass(frozen=True)
class Booted:
    """One boot through run_vm and the benchmark's parser: samples None unless it was ok."""

    outcome: str
    reason: str
    wall_seconds: float  # host clock around run_vm: domain defined to destroyed
    host_busy: float | None
    samples: list[float] | None


def boot_and_parse(cfg: Config, image: Path, initrd: Path, tmp: Path, rnd: int) -> Booted:
    """Boot `cfg` once (its console in `tmp`) and read METRIC's samples from the console."""
    spec = vm_spec(cfg, image, initrd, tmp / f"{cfg.name}-{rnd}.log")
    started = time.monotonic()
    out = run_vm(URI, spec, boot_timeout=300, run_timeout=300)
    wall = time.monotonic() - started
    busy = out.host.busy_share if out.host is not None else None
    if out.outcome != OK:
        return Booted(out.outcome, out.reason, wall, busy, None)
    try:
        parsed = BENCH.measure(out.console, RunContext(out.wall_seconds, out.ready_seconds))
    except ParseError as exc:
        return Booted("parse-failed", str(exc), wall, busy, None)
    return Booted(OK, "", wall, busy, [float(v) for v in parsed[METRIC]])


def boot_once(cfg: Config, image: Path, initrd: Path, tmp: Path, rnd: int) -> Boot:
    b = boot_and_parse(cfg, image, initrd, tmp, rnd)
    if b.samples is None:
        return Boot(cfg.name, rnd, b.outcome, b.reason, b.wall_seconds, host_busy=b.host_busy)
    run = [RunSamples(rnd, tuple(b.samples))]
    values = {s: float(run_values(run, s, f"{cfg.name} {METRIC}")[0]) for s in STATISTICS}
    return Boot(cfg.name, rnd, OK, "", b.wall_seconds, len(b.samples), values, b.host_busy)


def measure(
    configs: Sequence[Config], images: dict[str, Path], initrds: dict[str, Path], boots: int
) -> list[Boot]:
    """`boots` rounds; each boots every configuration once, from a rotating start."""
    done: list[Boot] = []
    with tempfile.TemporaryDirectory(prefix="rcubench-quiet-", dir="/var/tmp") as tmp:
        Path(tmp).chmod(0o755)
        for rnd in range(boots):
            shift = rnd % len(configs)
            for cfg in [*configs[shift:], *configs[:shift]]:
                b = boot_once(cfg, images[cfg.kernel], initrds[cfg.init], Path(tmp), rnd)
                done.append(b)
                got = (
                    f"mean {b.values['mean']:.3f} p90 {b.values['p90']:.3f} ms, {b.gps} GPs"
                    if b.values
                    else f"{b.outcome}: {b.reason[:120]}"
                )
                print(
                    f"  round {rnd + 1}/{boots} {cfg.name:46} {b.wall_seconds:5.1f} s  {got}",
                    file=sys.stderr,
                    flush=True,
                )
    return done


# -- summary -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    config: str
    ok: int
    failed: int
    wall: float
    gps: float
    busy: float | None  # median share of the host's CPUs others used during a boot
    median_ms: dict[str, float]
    cv: dict[str, float | None]  # % (SD of the logs x 100); None with fewer than 2 boots

    def sds(self, statistic: str, n: int, alpha: float) -> float | None:
        cv = self.cv[statistic]
        return None if cv is None else sequential.smallest_detectable_shift(cv, n, n, alpha=alpha)


def summarise(cfg: Config, boots: Sequence[Boot]) -> Summary:
    mine = [b for b in boots if b.config == cfg.name]
    ok = [b for b in mine if b.values is not None]
    per_stat = {s: [b.values[s] for b in ok if b.values is not None] for s in STATISTICS}
    cv: dict[str, float | None] = {
        s: statistics.stdev(math.log(v) for v in vs) * 100 if len(vs) >= 2 else None
        for s, vs in per_stat.items()
    }
    return Summary(
        config=cfg.name,
        ok=len(ok),
        failed=len(mine) - len(ok),
        wall=statistics.median(b.wall_seconds for b in mine) if mine else math.nan,
        gps=statistics.median(b.gps for b in ok) if ok else math.nan,
        busy=statistics.median(busy)
        if (busy := [b.host_busy for b in mine if b.host_busy is not None])
        else None,
        median_ms={s: statistics.median(vs) if vs else math.nan for s, vs in per_stat.items()},
        cv=cv,
    )


def _ratio(x: float | None, base: float | None) -> str:
    return "n/a" if x is None or not base else f"{x / base:.2f}"


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.2f}"


def report(configs: Sequence[Config], boots: Sequence[Boot]) -> None:
    design = Design()
    alpha = design.alpha_at(len(design.looks))  # the last look's nominal p boundary
    sums = [summarise(c, boots) for c in configs]
    print(
        f"\nsync-rcu-latency {METRIC}, per-run statistics; CV = SD of log values x 100 (%); "
        f"SDS at 80% power, alpha {alpha:.4f} (last look)"
    )
    print(
        f"{'configuration':46} {'ok':>3} {'fail':>4} {'busy':>4} {'wall s':>6} {'GPs':>5} "
        f"{'mean ms':>7} {'p90 ms':>7} {'CV mean':>7} {'CV p90':>6} {'CV p50':>6} "
        + " ".join(f"{f'SDS{n} {s}':>10}" for n in SDS_RUNS for s in ("mean", "p90"))
    )
    for s in sums:
        sds = " ".join(
            f"{_pct(s.sds(st, n, alpha)):>10}" for n in SDS_RUNS for st in ("mean", "p90")
        )
        print(
            f"{s.config:46} {s.ok:3} {s.failed:4} {_share(s.busy):>4} {s.wall:6.2f} {s.gps:5.0f} "
            f"{s.median_ms['mean']:7.3f} {s.median_ms['p90']:7.3f} {_pct(s.cv['mean']):>7} "
            f"{_pct(s.cv['p90']):>6} {_pct(s.cv['p50']):>6} {sds}"
        )
    base = next((s for s in sums if s.config == "default"), None)
    if base is not None:
        print("\nratios against default (CV ratio = SDS ratio at equal n; < 1 is quieter)")
        print(f"{'configuration':46} {'CV mean':>7} {'CV p90':>7} {'CV p50':>7} {'wall':>6}")
        for s in sums:
            ratios = " ".join(
                f"{_ratio(s.cv[st], base.cv[st]):>7}" for st in ("mean", "p90", "p50")
            )
            print(f"{s.config:46} {ratios} {_ratio(s.wall, base.wall):>6}")
    print(
        f"\ntarget: SDS of the per-run mean and p90 <= {TARGET_SDS_PCT:.0f}% at "
        f"{TARGET_RUNS} runs per side"
    )
    for s in sums:
        mean, p90 = (s.sds(st, TARGET_RUNS, alpha) for st in ("mean", "p90"))
        ok = mean is not None and p90 is not None and max(mean, p90) <= TARGET_SDS_PCT
        few = f"; too few to judge, take >= {MIN_BOOTS}" if s.ok < MIN_BOOTS else ""
        print(
            f"{s.config:46} {'PASS' if ok else 'FAIL'}  SDS{TARGET_RUNS} mean {_pct(mean)}% "
            f"p90 {_pct(p90)}%  ({s.ok} boots{few})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boots", type=int, default=24, help="boots per configuration")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="CONFIG",
        choices=[c.name for c in CONFIGS],
        help="these configurations only",
    )
    parser.add_argument("--json", type=Path, help="write every boot's values here")
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="build (or find cached) the kernels and initramfs images, boot nothing: the "
        "build can run while the host is busy, the boots need it quiet",
    )
    args = parser.parse_args()
    if args.boots < 2:
        parser.error("--boots must be at least 2 (a CV needs two boots)")
    configs = [c for c in CONFIGS if not args.only or c.name in args.only]
    started = time.monotonic()
    built = build_kernels(configs)
    print_kconfig_difference(built)
    images = {k: out.image for k, out in built.items()}
    initrds = {}
    if any(c.init == "shared" for c in configs):
        initrds["shared"] = initramfs(ARCH)
    if any(c.init == "idle" for c in configs):
        initrds["idle"] = idle_initramfs(ARCH, DATA / "images")
    for name, path in initrds.items():
        print(f"initramfs {name:6} {path.stat().st_size:9} bytes  {path}")
    if args.build_only:
        return 0
    for c in configs:
        cmdline = vm_spec(c, images[c.kernel], initrds[c.init], Path()).full_cmdline
        print(
            f"config {c.name}: Kconfig base + [{' '.join(FRAGMENTS[c.kernel])}]; "
            f"initramfs {c.init}; {c.topology}; cmdline {cmdline!r}"
        )
    print(f"booting {len(configs)} configurations x {args.boots} rounds, interleaved", flush=True)
    boots_started = time.monotonic()
    boots = measure(configs, images, initrds, args.boots)
    took = time.monotonic() - boots_started
    print(
        f"\n{len(boots)} boots in {took:.0f} s ({took / len(boots):.1f} s a boot); "
        f"whole script {time.monotonic() - started:.0f} s"
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(b) for b in boots], indent=1))
    report(configs, boots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
