"""Every benchmark rcubench runs: its spec and its parser, by name."""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from benchmarks.boot_time import parser as boot_time_parser
from benchmarks.boot_time.spec import SPEC as BOOT_TIME
from benchmarks.bpf_slab import parser as bpf_slab_parser
from benchmarks.bpf_slab.spec import SPEC as BPF_SLAB
from benchmarks.smt_toggle import parser as smt_toggle_parser
from benchmarks.smt_toggle.spec import SPEC as SMT_TOGGLE
from benchmarks.spec import BenchmarkSpec, Kind, Parsed, ParseError, RunContext
from benchmarks.sync_rcu_latency import parser as sync_rcu_parser
from benchmarks.sync_rcu_latency.spec import EXPEDITED as SYNC_RCU_EXP
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


BENCHMARKS: dict[str, Benchmark] = {
    b.spec.name: b
    for b in (
        Benchmark(SYNC_RCU, sync_rcu_parser.parse),
        Benchmark(SYNC_RCU_EXP, sync_rcu_parser.parse),
        Benchmark(SMT_TOGGLE, smt_toggle_parser.parse),
        Benchmark(BOOT_TIME, boot_time_parser.parse),
        Benchmark(BPF_SLAB, bpf_slab_parser.parse),
        Benchmark(SYNC_RCU_EXP_LOAD, sync_rcu_exp_load_parser.parse),
    )
}


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        known = ", ".join(BENCHMARKS)
        raise KeyError(f"unknown benchmark {name!r}; known: {known}") from None


def kconfig_for(names: Iterable[str]) -> tuple[str, ...]:
    """The Kconfig lines a kernel needs to run all of `names` (sorted, without repeats), so
    one build serves every benchmark of a comparison."""
    return tuple(sorted({line for name in names for line in get(name).spec.kconfig}))
