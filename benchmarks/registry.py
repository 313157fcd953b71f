"""Every benchmark rcubench runs: its spec and its parser, by name."""

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from benchmarks import presets
from benchmarks.boot_time import parser as boot_time_parser
from benchmarks.boot_time.spec import SPEC as BOOT_TIME
from benchmarks.bpf_slab import parser as bpf_slab_parser
from benchmarks.bpf_slab.spec import SPEC as BPF_SLAB
from benchmarks.smt_toggle import parser as smt_toggle_parser
from benchmarks.smt_toggle.spec import SPEC as SMT_TOGGLE
from benchmarks.spec import BenchmarkSpec, Kind, Parsed, ParseError, RunContext
from benchmarks.sync_rcu_latency import parser as sync_rcu_parser
from benchmarks.sync_rcu_latency.spec import EXPEDITED as SYNC_RCU_EXP
from benchmarks.sync_rcu_latency.spec import EXPEDITED_PRESETS as SYNC_RCU_EXP_PRESETS
from benchmarks.sync_rcu_latency.spec import PRESETS as SYNC_RCU_PRESETS
from benchmarks.sync_rcu_latency.spec import SPEC as SYNC_RCU
from benchmarks.sync_rcu_latency_exp_load import parser as sync_rcu_exp_load_parser
from benchmarks.sync_rcu_latency_exp_load.spec import SPEC as SYNC_RCU_EXP_LOAD


@dataclass(frozen=True)
class Benchmark:
    spec: BenchmarkSpec
    parse: Callable[[str, RunContext], Parsed]

    def measure(self, console: str, ctx: RunContext) -> Parsed:
        """The spec's metrics from one run's console: the parser's output, held to the
        spec (every metric, finite values, one for a VALUE metric) so that no garbled
        console becomes data; anything else is a ParseError naming the problem."""
        parsed = self.parse(console, ctx)
        for metric in self.spec.metrics:
            values = parsed.get(metric.name)
            if not values:
                raise ParseError(f"{self.spec.name}: no value for {metric.name}")
            if metric.kind is Kind.VALUE and len(values) != 1:
                raise ParseError(f"{self.spec.name}: {len(values)} values for {metric.name}")
            if not all(math.isfinite(v) for v in values):
                raise ParseError(f"{self.spec.name}: a non-finite value for {metric.name}")
        return parsed


def _with_presets(
    spec: BenchmarkSpec, parse: Callable[[str, RunContext], Parsed], *of: presets.Preset
) -> tuple[Benchmark, ...]:
    """The benchmark and, after it, each of its presets (benchmarks/presets.py): a
    benchmark of its own, parsed by the same parser."""
    return (Benchmark(spec, parse), *(Benchmark(presets.derive(spec, p), parse) for p in of))


BENCHMARKS: dict[str, Benchmark] = {
    b.spec.name: b
    for b in (
        *_with_presets(SYNC_RCU, sync_rcu_parser.parse, *SYNC_RCU_PRESETS),
        *_with_presets(SYNC_RCU_EXP, sync_rcu_parser.parse, *SYNC_RCU_EXP_PRESETS),
        Benchmark(SMT_TOGGLE, smt_toggle_parser.parse),
        Benchmark(BOOT_TIME, boot_time_parser.parse),
        Benchmark(BPF_SLAB, bpf_slab_parser.parse),
        Benchmark(SYNC_RCU_EXP_LOAD, sync_rcu_exp_load_parser.parse),
    )
}


@functools.lru_cache(maxsize=256)
def _variant(name: str) -> Benchmark | None:
    """A sweep's variant ("<base>--<param>-<value>", presets.variant) of a registered
    benchmark, derived on demand (a sweep may ask for any value within REVIEWED's bounds);
    None for any other name. A variant a named preset already is has that preset's name
    instead, so it is not found here."""
    asked = presets.split(name)
    if not asked or (base := BENCHMARKS.get(asked[0])) is None:
        return None
    found = presets.parse_variant(base.spec, asked[1])
    if found is None:
        return None
    try:
        spec = variant_of(base.spec.name, *found)
    except ValueError:
        return None
    return Benchmark(spec, base.parse) if spec.name == name else None


def find(name: str) -> Benchmark | None:
    """The benchmark `name` (registered, or a sweep's variant of one), None if unknown."""
    return BENCHMARKS.get(name) or _variant(name)


def variant_of(base: str, parameter: str, value: int) -> BenchmarkSpec:
    """The benchmark a sweep's point runs: `base` with `parameter` at `value` (a named
    preset of `base` where one sets exactly that; `base` where it already does). KeyError
    for an unknown base, ValueError naming the problem otherwise."""
    spec = get(base).spec
    found = presets.variant(spec, parameter, value)  # held to `sweepable` and REVIEWED
    for named in presets_of(base) if found is not spec else ():
        if preset_params(named) == f"{parameter}={value}":
            return named
    return found


def get(name: str) -> Benchmark:
    """The benchmark `name`, else KeyError naming the known ones; for an unknown preset
    of a known benchmark ("<base>--<preset>"), that benchmark's presets."""
    if (found := find(name)) is not None:
        return found
    asked = presets.split(name)
    if asked and asked[0] in BENCHMARKS:
        base, preset = asked
        raise KeyError(f"benchmark {base} has no preset {preset[:40]!r}; "
                       f"its presets: {describe_presets(base)}") from None  # fmt: skip
    known = ", ".join(BENCHMARKS)
    raise KeyError(f"unknown benchmark {name[:80]!r}; known: {known}") from None


def presets_of(base: str) -> list[BenchmarkSpec]:
    """The presets of the benchmark `base`, in the registry's order."""
    return [b.spec for b in BENCHMARKS.values() if b.spec.base == base]


def describe_presets(base: str | None = None) -> str:
    """The presets (of `base`, or all) as a submitter names them, with what each sets:
    "sync-rcu-latency--many-writers (rcuscale.nwriters=16), ...", or "none"."""
    specs = presets_of(base) if base else [b.spec for b in BENCHMARKS.values() if b.spec.preset]
    return ", ".join(f"{s.name} ({preset_params(s)})" for s in specs) or "none"


def preset_params(spec: BenchmarkSpec) -> str:
    """What a preset sets over its base: the parameters of its command line that its base's
    lacks or gives another value (empty for a benchmark that is no preset)."""
    if not spec.base:
        return ""
    base = set(BENCHMARKS[spec.base].spec.cmdline.split())
    return " ".join(t for t in spec.cmdline.split() if t not in base)


def kconfig_for(names: Iterable[str]) -> tuple[str, ...]:
    """The Kconfig lines a kernel needs to run all of `names` (sorted, without repeats), so
    one build serves every benchmark of a comparison."""
    return tuple(sorted({line for name in names for line in get(name).spec.kconfig}))
