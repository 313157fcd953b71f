"""The declarative description every benchmark provides.

A spec says what the kernel needs (Kconfig fragment, command line), what the guest runs, and
which metrics come out, with their unit, which direction is better, and which one is primary
(the one gated with Holm across benchmarks; the others are secondary, gated with BH), and
any figures over several metrics that the report should draw besides the per-metric ones.
"""

import re
from dataclasses import dataclass, field
from enum import Enum

_NAME = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$")
NAME_MAX = 64  # the benchmark columns of runs, verdicts, watches and bisections
_KCONFIG = re.compile(r"^CONFIG_[A-Z0-9_]+=(y|m|n|-?\d+|0x[0-9a-fA-F]+|\"[^\"]*\")$")


class Better(Enum):
    LOWER = "lower"
    HIGHER = "higher"


class Kind(Enum):
    SAMPLES = "samples"  # many samples per run (latencies): summarised per run, tails pooled
    VALUE = "value"  # one value per run (boot time, slab kB)


# Benchmark kernels are built with every requested benchmark's Kconfig, so the built-in
# rcuscale test starts at every boot and powers the guest off when done. Benchmarks other
# than rcuscale's own keep it idle: no writer or reader kthreads, no shutdown.
RCUSCALE_IDLE = "rcuscale.nwriters=0 rcuscale.nreaders=0 rcuscale.shutdown=0"


class ParseError(ValueError):
    """A benchmark's console output is missing, truncated or garbled: never partial data."""


# What a parser returns: metric name -> samples (one value for Kind.VALUE metrics).
Parsed = dict[str, tuple[float, ...]]


@dataclass(frozen=True)
class RunContext:
    """What the host saw of the run, for metrics the console alone cannot give."""

    wall_seconds: float  # domain start to domain end
    ready_seconds: float | None  # domain start to the guest's RCUBENCH-READY line


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: Better
    kind: Kind
    primary: bool = False
    threshold: float | None = None  # practical threshold: % for times, absolute for memory
    threshold_is_absolute: bool = False
    # Samples are durations that come in whole jiffies (plus a small offset): a grace
    # period ends on a tick. Such a metric is also tested on its tail share and capped
    # mean in jiffies (stats/jiffies.py), with HZ from the built kernel's config.
    jiffies: bool = False
    # The tail share is a co-primary of this (primary) metric: Holm over it and the p50.
    tail_share_primary: bool = False
    # A guard (issue 37): a secondary whose move says what the primary's change cost (more
    # grace periods, smaller batches), shown on one line beside the primary's verdict in
    # the report, the mail, the API and the CLI under this label. Never a primary.
    guard: str = ""

    def __post_init__(self) -> None:
        # An absolute threshold has no default (a % does: the design's 2%): never 0 by omission.
        if self.guard and self.primary:
            raise ValueError(f"metric {self.name}: a guard is a secondary, never the primary")
        if self.threshold_is_absolute and self.threshold is None:
            raise ValueError(f"metric {self.name}: an absolute threshold (in {self.unit}) "
                             "must be given")  # fmt: skip


# Line styles a figure may ask for (plotly's names; the benchmarks never import plotly).
DASHES = ("solid", "dash", "dot", "dashdot")


@dataclass(frozen=True)
class FigureLine:
    """One line of a FigureSpec, per side: the metric at each x value."""

    label: str  # in the legend after the side, e.g. "A peak"
    metric: str  # metric name with "{x}" where the x value goes, e.g. "slab_kb_peak_d{x}"
    dash: str = "solid"  # one of DASHES

    def metric_at(self, x: float) -> str:
        return self.metric.replace("{x}", str(x))


@dataclass(frozen=True)
class FigureSpec:
    """A figure over several metrics of one benchmark, drawn by the report next to the
    per-metric ones: a sweep, each line's per-run metric values at each x, summarised per
    side as the median over runs with its interquartile band. Data only: the report draws
    it, so a benchmark declares its figures without touching the report."""

    title: str
    x: tuple[float, ...]  # the x values, in drawing order (bpf-slab: the delays)
    x_label: str  # axis title
    y_label: str  # axis title; all metrics of the figure share one unit
    lines: tuple[FigureLine, ...]
    x_name: str = "x"  # in the hover text: "<x_name> <x> <x_unit>"
    x_unit: str = ""

    def metrics(self) -> tuple[str, ...]:
        """Every metric the figure draws, line by line."""
        return tuple(line.metric_at(x) for line in self.lines for x in self.x)


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    description: str
    kconfig: tuple[str, ...]  # fragment lines, e.g. "CONFIG_RCU_SCALE_TEST=y"
    cmdline: str  # kernel command line the benchmark needs
    guest_command: str  # what the guest's init runs ("" for in-kernel tests)
    metrics: tuple[Metric, ...]
    archs: tuple[str, ...] = ("x86_64", "ppc64le")
    notes: str = ""
    figures: tuple[FigureSpec, ...] = ()  # extra figures over several metrics
    # rcuscale's writer runs and dumps the ftrace buffer when done: traced diagnostic runs
    # of it give grace-period phases (benchmarks/rcutrace).
    traceable: bool = False
    # A sweep's scaling verdict (stats/sweeps.py): B's slope of the primary along the axis
    # counts as steeper than A's when their ratio is beyond 1 +- scaling_threshold; when A's
    # slope is flat (its CI holds 0), when B - A is beyond +- slope_threshold (the slope's
    # own units: an exponent on log-log scales).
    scaling_threshold: float = 0.10
    slope_threshold: float = 0.05
    # A preset (benchmarks/presets.py): a reviewed variant of the benchmark `base`, under a
    # name of its own so that nothing keyed by benchmark name mixes its numbers with the
    # base's. Empty for a benchmark of its own.
    base: str = ""
    preset: str = ""
    # The rcuscale.* parameters (of benchmarks/presets.py REVIEWED) a sweep may vary at its
    # points (presets.variant), in the order a submitter is told them.
    sweepable: tuple[str, ...] = ()
    _by_name: dict[str, Metric] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        errors = spec_errors(self)
        if errors:
            raise ValueError(f"benchmark spec {self.name!r}: " + "; ".join(errors))
        object.__setattr__(self, "_by_name", {m.name: m for m in self.metrics})

    @property
    def primary(self) -> Metric:
        return next(m for m in self.metrics if m.primary)

    def metric(self, name: str) -> Metric:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"benchmark {self.name!r} has no metric {name!r}") from None


def spec_errors(spec: BenchmarkSpec) -> list[str]:
    """Everything wrong with a spec (empty when it is valid)."""
    errors = []
    if not _NAME.match(spec.name):
        errors.append("name must be lowercase letters, digits and dashes")
    if len(spec.name) > NAME_MAX:
        errors.append(f"name is longer than {NAME_MAX} characters (the database's columns)")
    if bool(spec.base) != bool(spec.preset):
        errors.append("a preset names its base and itself: both or neither")
    if "--" in spec.name and not spec.preset:
        errors.append('only a preset\'s name holds "--" (benchmarks/presets.py)')
    bad = [line for line in spec.kconfig if not _KCONFIG.match(line)]
    if bad:
        errors.append(f"Kconfig lines not of the form CONFIG_X=value: {bad}")
    names = [m.name for m in spec.metrics]
    if not names:
        errors.append("no metrics")
    if len(set(names)) != len(names):
        errors.append(f"duplicate metric names: {sorted({n for n in names if names.count(n) > 1})}")
    primaries = [m.name for m in spec.metrics if m.primary]
    if len(primaries) != 1:
        errors.append(f"exactly one primary metric required, found {primaries or 'none'}")
    for m in spec.metrics:
        if not _NAME.match(m.name.replace("_", "-")):
            errors.append(f"metric name {m.name!r} is not an identifier")
        if not m.unit:
            errors.append(f"metric {m.name!r} has no unit")
        if m.threshold is not None and m.threshold < 0:
            errors.append(f"metric {m.name!r} has a negative threshold")
        if m.jiffies and (m.kind is not Kind.SAMPLES or m.unit != "ms"):
            errors.append(f"metric {m.name!r}: only a latency in ms comes in jiffies")
        if m.tail_share_primary and not (m.jiffies and m.primary):
            errors.append(f"metric {m.name!r}: a co-primary tail share needs a primary "
                          "metric in jiffies")  # fmt: skip
    unknown = set(spec.archs) - {"x86_64", "ppc64le"}
    if unknown:
        errors.append(f"unknown archs: {sorted(unknown)}")
    units = {m.name: m.unit for m in spec.metrics}
    for f in spec.figures:
        errors += _figure_errors(f, units)
    return errors


def _figure_errors(f: FigureSpec, units: dict[str, str]) -> list[str]:
    errors = []
    where = f"figure {f.title!r}"
    if not f.title:
        errors.append("a figure has no title")
    if not f.x:
        errors.append(f"{where} has no x values")
    if len(set(f.x)) != len(f.x):
        errors.append(f"{where} repeats x values")
    if not f.lines:
        errors.append(f"{where} has no lines")
    labels = [line.label for line in f.lines]
    if len(set(labels)) != len(labels):
        errors.append(f"{where} repeats line labels")
    for line in f.lines:
        if "{x}" not in line.metric:
            errors.append(f"{where}: metric pattern {line.metric!r} has no {{x}}")
        if line.dash not in DASHES:
            errors.append(f"{where}: line {line.label!r} has an unknown dash {line.dash!r}")
    names = f.metrics()
    missing = [n for n in names if n not in units]
    if missing:
        errors.append(f"{where} names metrics the spec lacks: {missing}")
    # One y axis: a figure mixing units would put kB and 1/s on the same scale.
    mixed = sorted({units[n] for n in names if n in units})
    if len(mixed) > 1:
        errors.append(f"{where} mixes units {mixed}")
    return errors
