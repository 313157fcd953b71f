"""The data perf/web_load.py seeds: runs made from real consoles, and the engine's verdicts.

A seeded run of sync-rcu-latency or sync-rcu-latency-exp takes the shape of a captured
console of that benchmark on that arch (benchmarks/sync_rcu_latency/fixtures, ~20 kB) and
of the values its parser read from it: the console's writer-duration lines are rewritten
with the run's samples (101 per run, the captured ones scaled by the side's factor, with
1% noise per sample), its totals line with the run's test duration, gps and batches; a
failed run's console stops before the benchmark (a panic's, with the kernel's line). A
done comparison's MetricVerdict rows are the statistics engine's own results on synthetic
runs of the same shape (48 per side, B's latencies `shift` times A's), computed once per
set of benchmarks and shift and cloned onto every such comparison (perf/_web_seed.py).

Imported by perf/web_load.py once Django is set up (Run's error codes).
"""

import json
import re
import sys
from pathlib import Path

import numpy as np

from benchmarks.guest import RCUSCALE_WINDOW
from benchmarks.registry import get as get_benchmark
from benchmarks.spec import Better, Kind
from stats import methods, verdicts
from stats.battery import analyse
from stats.design import Design
from stats.inputs import BenchmarkFailures, MetricInput, RunSamples
from webapp.comparisons.models import Run

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "benchmarks" / "sync_rcu_latency" / "fixtures"
SYNC, EXP = "sync-rcu-latency", "sync-rcu-latency-exp"

# --- synthetic runs from real consoles --------------------------------------------------

WD_LINE = re.compile(r"^(\[\s*[\d.]+\] rcu-scale:\s+\d+ writer-duration:\s+\d+ )\d+\s*$")
TOTALS = re.compile(r"duration: \d+ gps: \d+ batches: \d+")


class Source:
    """One captured console (a benchmark on an arch) and the values its parser read: the
    shape every seeded run of that benchmark and arch takes, its numbers varied."""

    def __init__(self, stem: str) -> None:
        text = (FIXTURES / f"{stem}.log").read_text()
        self.expected = json.loads((FIXTURES / f"{stem}.expected.json").read_text())["metrics"]
        lines = text.split("\n")
        # The console as chunks of constant text, each followed by one writer-duration value.
        self.chunks: list[str] = []
        current: list[str] = []
        for line in lines:
            m = WD_LINE.match(line)
            if m:
                current.append(m.group(1))
                self.chunks.append("\n".join(current))
                current = [""]
            else:
                current.append(line)
        self.tail = "\n".join(current)
        assert len(self.chunks) == len(self.expected["writer_duration"]), stem
        self.head_lines = lines[: len(lines) // 2]

    def values(self, rng: np.random.Generator, factor: float) -> dict[str, list[float]]:
        """One run's metrics: the captured run's, scaled by `factor` (side and run-to-run
        variation) with 1% noise per sample; ns resolution, as the console has them."""
        base = np.asarray(self.expected["writer_duration"])
        wd = np.rint(base * factor * np.exp(rng.normal(0, 0.01, base.size)) * 1e6) / 1e6
        gps = float(self.expected["gps"][0])
        batches = float(self.expected["batches"][0] + int(rng.integers(-1, 2)))
        return {
            "writer_duration": wd.tolist(),
            "test_duration": [round(self.expected["test_duration"][0] * factor, 6)],
            "gps": [gps],
            "batches": [batches],
            "updates_per_gp": [gps / batches],  # the parser's, from the two above
            # init's frame of the window, kept as captured by console()
            **{
                m.name: list(self.expected[m.name])
                for m in RCUSCALE_WINDOW
                if m.name in self.expected
            },  # normal grace periods only: not -exp's
        }

    def console(self, v: dict[str, list[float]]) -> str:
        parts: list[str] = []
        for chunk, ms in zip(self.chunks, v["writer_duration"], strict=True):
            parts += (chunk, str(round(ms * 1e6)))
        text = "".join(parts) + self.tail
        totals = (f"duration: {round(v['test_duration'][0] * 1e6)} gps: {int(v['gps'][0])} "
                  f"batches: {int(v['batches'][0])}")  # fmt: skip
        return TOTALS.sub(totals, text, count=1)

    def failed_console(self, error: str) -> str:
        head = "\n".join(self.head_lines)
        if error == Run.Error.PANIC:
            return head + "\n[    1.204311] Kernel panic - not syncing: Attempted to kill init!\n"
        return head + "\n"  # boot-failed, timeout: the console stops


SOURCES: dict[tuple[str, str], Source] = {}


def source(bench: str, arch: str) -> Source:
    key = (bench, arch)
    if key not in SOURCES:
        stem = "x86_64-pc-tcg" if arch == "x86_64" else "ppc64le-pseries-tcg"
        SOURCES[key] = Source(stem + ("-exp" if bench == EXP else ""))
    return SOURCES[key]


def check_specs() -> None:
    for bench in (SYNC, EXP):
        names = {m.name for m in get_benchmark(bench).spec.metrics}
        counts = {"writer_duration", "test_duration", "gps", "batches", "updates_per_gp"}
        window = {m.name for m in RCUSCALE_WINDOW} if bench == SYNC else set()
        if names != counts | window:
            sys.exit(f"{bench}'s metrics changed ({sorted(names)}): update Source.values")


# --- verdicts: the engine's rows on data of the same shape ------------------------------

TEMPLATES: dict[tuple[tuple[str, ...], float], tuple[str, list[verdicts.StatResult]]] = {}


def verdict_template(
    benches: tuple[str, ...], shift: float
) -> tuple[str, list[verdicts.StatResult]]:
    """The engine's verdict and results for B `shift` times A on these benchmarks, at 48
    runs per side (the second look): computed once, cloned onto each such comparison."""
    key = (benches, shift)
    if key in TEMPLATES:
        return TEMPLATES[key]
    rng = np.random.default_rng(len(TEMPLATES))
    n = 48
    metrics = []
    failures = []
    for bench in benches:
        spec = get_benchmark(bench).spec
        src = source(bench, "x86_64")
        runs: dict[str, list[dict[str, list[float]]]] = {
            side: [src.values(rng, (shift if side == "B" else 1.0) * np.exp(rng.normal(0, 0.01)))
                   for _ in range(n)]
            for side in "AB"
        }  # fmt: skip
        for m in spec.metrics:
            per_side = {side: [RunSamples(2 * i + (side == "B"), tuple(r[m.name]), False)
                               for i, r in enumerate(runs[side])] for side in "AB"}  # fmt: skip
            metrics.append(MetricInput(
                benchmark=bench, name=m.name, unit=m.unit,
                per_run_samples=m.kind is Kind.SAMPLES,
                lower_is_better=m.better is Better.LOWER, primary=m.primary,
                runs_a=per_side["A"], runs_b=per_side["B"], threshold=m.threshold,
                threshold_is_absolute=m.threshold_is_absolute,
            ))  # fmt: skip
        ok = methods.failure_counts(["ok"] * n)
        failures.append(BenchmarkFailures(bench, ok, ok))
    analysis = analyse(metrics, Design(seed=len(TEMPLATES)), failures)
    TEMPLATES[key] = (analysis.verdict, analysis.results)
    return TEMPLATES[key]
