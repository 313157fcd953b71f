"""Presets: named, reviewed variants of an rcuscale benchmark (issue 37).

Developers run rcuscale with other settings than a benchmark's (more writers, a holdoff
between grace periods), but a side's extra command line may not set rcuscale.* at all
(benchmarks/cmdline.py): a free value could make a run that never ends (shutdown=0),
measure something else than the metric says (gp_async=1 times call_rcu(), not a grace
period), or differ between the sides. A preset is the way in instead: a benchmark's spec
module declares each as data (a name, a one-line description, the rcuscale.* parameters it
sets and why they were reviewed), and `derive` makes it a benchmark of its own,
"<base>--<preset>" (the separator of derived targets, webapp/comparisons/targets.py; no
base name holds "--", so the name says which base and preset it is). Runs, verdicts,
noise floors, tree history and baselines are keyed by benchmark name, so a preset's numbers
never mix with its base's; both sides of a comparison run the same preset, as they run the
same benchmark; and the reproducer names it like any benchmark.

What a preset may set is the table REVIEWED below, each parameter with its bounds, read in
kernel/rcu/rcuscale.c (Linux 6.12); `preset_errors` holds every preset to it. Never
shutdown (it stays 1: rcuscale powers the guest off when its writers are done, so a run
ends), holdoff and nreaders (the base's timing and load), gp_async (writer-duration would
time call_rcu() and the rcu_barrier() at gp_async_max, not a grace period), minruntime
(a longer run, no other measurement), scale_type and the kfree_* test (another benchmark).

A sweep's variant axis (issue 36) needs a value per point, not a named preset per value: a
benchmark declares which REVIEWED parameters are `sweepable`, and `variant` derives the
benchmark for one value, "<base>--<param>-<value>" ("sync-rcu-latency--nwriters-4"), a
preset like the named ones (registry.find resolves such names; nothing registers them).
"""

import dataclasses
import re
from dataclasses import dataclass

from benchmarks.spec import BenchmarkSpec

SEP = "--"
_PRESET_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")  # no "--": the separator
# rcuscale.* parameter -> (lowest, highest) value a preset may give it.
REVIEWED: dict[str, tuple[int, int]] = {
    # Writers, each pinned to CPU (index % CPUs) at one SCHED_FIFO priority, each printing
    # at least 100 writer-duration lines (MIN_MEAS). 1: a preset never makes an idle
    # rcuscale (0) or a writer per CPU (-1, which varies with the target); 32: beyond it
    # each run's console and samples grow to no purpose (nwriters=200 on a 4-CPU guest:
    # 1.47 MB and 21,943 samples a run, writers queued 50 to a CPU; docs/benchmarks.md).
    "rcuscale.nwriters": (1, 32),
    "rcuscale.gp_exp": (0, 1),  # synchronize_rcu_expedited() instead of synchronize_rcu()
    # udelay() before each grace period, outside the timed window; at most 10 ms a GP.
    "rcuscale.writer_holdoff": (0, 10_000),
    # A sleep of 1..N jiffies before each grace period, outside the timed window.
    "rcuscale.writer_holdoff_jiffies": (0, 100),
}

# rcuscale's own value of a REVIEWED parameter a command line does not set (Linux 6.12
# rcuscale.c; nwriters' -1, a writer per CPU, is no preset's): a variant at it is its base.
KERNEL_DEFAULTS = {
    "rcuscale.gp_exp": 0, "rcuscale.writer_holdoff": 0, "rcuscale.writer_holdoff_jiffies": 0,
}  # fmt: skip
# Parameters that are counts: a sweep over one judges the growth exponent (log-log scales).
COUNTS = frozenset({"rcuscale.nwriters"})


@dataclass(frozen=True)
class Preset:
    name: str  # e.g. "many-writers"; the benchmark is "<base>--<name>"
    description: str  # one line, after the base's description
    params: str  # the rcuscale.* parameters it sets over the base's, "rcuscale.nwriters=16"
    reviewed: str  # why these values: what they measure, that the run still ends and parses
    # Whether the base primary's tail share in jiffies stays a co-primary: only where the
    # preset's own boots show its durations as close to whole jiffies as the base's.
    tail_share_primary: bool = True


def name(base: str, preset: str) -> str:
    return f"{base}{SEP}{preset}"


def split(benchmark: str) -> tuple[str, str] | None:
    """(base, preset) of a preset's name, None for another name."""
    base, sep, preset = benchmark.partition(SEP)
    return (base, preset) if sep else None


def derive(base: BenchmarkSpec, preset: Preset) -> BenchmarkSpec:
    """The benchmark that is `base` with `preset`'s parameters: the same Kconfig (one build
    serves both), guest and metrics; its command line is the base's with each of the
    preset's parameters in place of the base's value, or added. ValueError if the preset is
    not within REVIEWED."""
    if errors := preset_errors(base, preset):
        raise ValueError(f"preset {preset.name!r} of {base.name}: " + "; ".join(errors))
    own = dict(_pairs(preset.params))
    tokens = base.cmdline.split()
    keys = [t.split("=", 1)[0] for t in tokens]
    replaced = [f"{k}={own[k]}" if k in own else t for k, t in zip(keys, tokens, strict=True)]
    cmdline = " ".join([*replaced, *(f"{k}={v}" for k, v in own.items() if k not in keys)])
    metrics = base.metrics
    if not preset.tail_share_primary:  # the jiffy statistics stay, as secondaries
        metrics = tuple(dataclasses.replace(m, tail_share_primary=False) for m in metrics)
    return dataclasses.replace(
        base, name=name(base.name, preset.name),
        description=f"{base.description}; preset {preset.name}: {preset.description}",
        cmdline=cmdline, metrics=metrics, notes=preset.reviewed, base=base.name,
        preset=preset.name, sweepable=(),
    )  # fmt: skip


def short(parameter: str) -> str:
    """A REVIEWED parameter's name in a variant's name: "rcuscale.writer_holdoff" ->
    "writer-holdoff"."""
    return parameter.removeprefix("rcuscale.").replace("_", "-")


def variant(base: BenchmarkSpec, parameter: str, value: int) -> BenchmarkSpec:
    """`base` with `parameter` (one of its `sweepable`) set to `value`: `base` itself where
    it already runs with that value (its own, or the kernel's default), else the preset
    "<param>-<value>". ValueError naming the problem for a parameter `base` does not sweep
    or a value out of REVIEWED's bounds."""
    if parameter not in base.sweepable:
        sweeps = ", ".join(base.sweepable) or "none"
        raise ValueError(f"{base.name} does not sweep {parameter!r} (it sweeps: {sweeps})")
    low, high = REVIEWED[parameter]
    if not low <= value <= high:
        raise ValueError(bounds_error(parameter, value))
    given = {k: v for k, _, v in (t.partition("=") for t in base.cmdline.split())}
    if given.get(parameter, str(KERNEL_DEFAULTS.get(parameter))) == str(value):
        return base
    reviewed = (f"A sweep's point: {parameter} is sweepable in {base.name} within "
                f"[{low}, {high}] (benchmarks/presets.py REVIEWED); its jiffy alignment was "
                "not measured for every value, so the tail share is a secondary.")  # fmt: skip
    own = Preset(
        name=f"{short(parameter)}-{value}", description=f"{parameter}={value}",
        params=f"{parameter}={value}", reviewed=reviewed, tail_share_primary=False,
    )  # fmt: skip
    return derive(base, own)


def bounds_error(parameter: str, value: object) -> str:
    """Why `value` is no value a preset may give `parameter`: REVIEWED's bounds."""
    low, high = REVIEWED[parameter]
    return f"{parameter}={value}: not a whole number in [{low}, {high}]"


def parse_variant(base: BenchmarkSpec, preset: str) -> tuple[str, int] | None:
    """(parameter, value) of a variant's preset name ("nwriters-4") of `base`, None for
    another name (a value with leading zeros too: each variant has one name)."""
    for parameter in base.sweepable:
        found = re.fullmatch(rf"{re.escape(short(parameter))}-(0|[1-9]\d{{0,5}})", preset)
        if found:
            return parameter, int(found[1])
    return None


def preset_errors(base: BenchmarkSpec, preset: Preset) -> list[str]:
    """Everything that keeps `preset` from being a reviewed variant of `base` (empty: none)."""
    errors = []
    if not _PRESET_NAME.match(preset.name):
        errors.append("a preset's name is lowercase words joined by single dashes")
    if SEP in base.name:
        errors.append("a preset of a preset: derive from the benchmark itself")
    if "rcuscale.shutdown=1" not in base.cmdline.split():
        errors.append("its base is not an rcuscale benchmark that powers the guest off")
    if not preset.description or not preset.reviewed:
        errors.append("a preset says what it is and why its values were reviewed")
    try:
        pairs = _pairs(preset.params)
    except ValueError as exc:
        return [*errors, str(exc)]
    if not pairs:
        errors.append("a preset sets at least one parameter")
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        errors.append("a parameter is set twice")
    for key, value in pairs:
        if key not in REVIEWED:
            errors.append(f"{key} is not a parameter a preset may set ({', '.join(REVIEWED)})")
            continue
        low, high = REVIEWED[key]
        if not re.fullmatch(r"\d{1,6}", value) or not low <= int(value) <= high:
            errors.append(bounds_error(key, value))
    if pairs and all(f"{k}={v}" in base.cmdline.split() for k, v in pairs):
        errors.append("it sets nothing its base does not already set")
    return errors


def _pairs(params: str) -> list[tuple[str, str]]:
    pairs = []
    for token in params.split():
        key, eq, value = token.partition("=")
        if not eq or not value:
            raise ValueError(f"{token!r} is not name=value")
        pairs.append((key, value))
    return pairs
