"""Kernel command-line extras of a side: what a submitter may set, and how a run's command
line is put together from them and the benchmark's own parameters.

Extras are for comparing one build under two boot settings (an RCU tunable, CPU isolation).
Anyone who can submit writes them, so only parameters on an allow-list pass:

- rcutree.*, rcupdate.*, srcutree.*: RCU's own tunables, what a per-side A/B is for; except
  the stall-warning ones (names containing "stall"): the kernel's stall reports are how the
  runner ends a wedged run early, so a side may not silence or postpone them;
- nohz, nohz_full, isolcpus, irqaffinity, rcu_nocbs, rcu_nocb_poll, threadirqs, skew_tick,
  preempt: where RCU callbacks, kthreads and tick noise go;
- slab_nomerge, and mitigations=off|auto.

Refused, with the reason: rcuscale.* (the in-kernel benchmark itself: writers, readers,
expedited or not, async, holdoff and shutdown define what is measured and when the run ends;
shutdown=0 made every run a 20-minute timeout. Both sides must run the same benchmark; a
variant is a preset, a reviewed benchmark of its own such as sync-rcu-latency--many-writers
(benchmarks/presets.py; docs/benchmarks.md#presets says what each sets and why), and the
refusal names every preset with its parameters); rcubench.* (the guest's, set by the
benchmark); init, rdinit, console, panic and the rest (the runner's, or not RCU's: loglevel
could hide the benchmark's output, nosmt/maxcpus/mem reshape the target's machine); and any
parameter the benchmark's own command line sets. Values are plain (letters, digits and
, . : / _ + -): no quotes, which the kernel reads as grouping, nothing a shell expands.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from benchmarks.registry import describe_presets
from benchmarks.spec import BenchmarkSpec

_TOKEN = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_.-]*)(?:=(?P<value>[A-Za-z0-9_.,:/+-]+))?")
_CPUS = r"(?:all|[0-9N][0-9N,:/-]*)"  # a cpulist: 1-3,5 or 0-7:2/4 ("N" is the last CPU)
_FAMILIES = ("rcutree.", "rcupdate.", "srcutree.")
# Other parameters a side may set: name -> pattern of its value (None: a flag, no value).
_KNOBS: dict[str, str | None] = {
    "nohz": "on|off",
    "nohz_full": _CPUS,
    "isolcpus": rf"(?:(?:nohz|domain|managed_irq),)*{_CPUS}",
    "irqaffinity": _CPUS,
    "rcu_nocbs": _CPUS,  # or bare: every CPU
    "rcu_nocb_poll": None,
    "threadirqs": None,
    "skew_tick": "0|1",
    "preempt": "none|voluntary|full|lazy",
    "slab_nomerge": None,
    "mitigations": "off|auto",  # not auto,nosmt: that reshapes the machine
}
_VALUE_OPTIONAL = {"rcu_nocbs"}
# Where a submitter who wants other rcuscale settings is sent: the reviewed presets.
_PRESET_HINT = (
    f"; ask for a preset instead, a reviewed variant chosen as a benchmark: {describe_presets()}"
)
_RUNNER_OWN = {"init", "rdinit", "console", "earlycon", "panic", "panic_on_warn", "oops"}


class CmdlineError(ValueError):
    """Extras refused; the message names the parameter and why."""


@dataclass(frozen=True)
class Param:
    name: str
    value: str | None  # None: given without "="

    @property
    def key(self) -> str:
        """The name as the kernel compares it: "-" and "_" are the same in a name."""
        return self.name.replace("-", "_")


def params(cmdline: str) -> list[Param]:
    """The parameters of `cmdline`, refusing any token that is not a plain name or
    name=value."""
    found = []
    for token in cmdline.split():
        m = _TOKEN.fullmatch(token)
        if m is None:
            raise CmdlineError(
                f"{token[:80]!r} is not name or name=value of plain characters (letters, "
                "digits and , . : / _ + -)"
            )
        found.append(Param(m["name"], m["value"]))
    return found


def check_extra(extra: str, benchmarks: Iterable[BenchmarkSpec]) -> list[Param]:
    """The parameters of a side's `extra` command line, or CmdlineError naming the first
    one refused: off the allow-list, malformed, given twice, or set by one of `benchmarks`."""
    own = {p.key: spec.name for spec in benchmarks for p in params(spec.cmdline)}
    seen: set[str] = set()
    checked = params(extra)
    for p in checked:
        if p.key in own:
            hint = _PRESET_HINT if p.key.startswith("rcuscale.") else ""
            raise CmdlineError(f"{p.name} is set by the benchmark {own[p.key]} itself{hint}")
        if p.key in seen:
            raise CmdlineError(f"{p.name} is given twice")
        if why := _refusal(p):
            raise CmdlineError(f"{p.name} {why}")
        seen.add(p.key)
    return checked


def compose(own: str, extra: str) -> str:
    """A run's command line: the benchmark's rcubench.* parameters first (the guest reads
    the first of each), then the side's extras, then the benchmark's kernel parameters (the
    kernel keeps the last of each), so the benchmark's own win in both readers."""
    tokens = own.split()
    guest = [t for t in tokens if t.startswith("rcubench.")]
    kernel = [t for t in tokens if not t.startswith("rcubench.")]
    return " ".join([*guest, *extra.split(), *kernel])


def _refusal(p: Param) -> str | None:
    key = p.key
    if key.startswith("rcubench."):
        return "is the guest's own parameter, set by the benchmark"
    if key.startswith("rcuscale."):
        return (
            "configures the benchmark itself (what is measured, when the run ends); both "
            f"sides must run the same benchmark{_PRESET_HINT}"
        )
    if key in _RUNNER_OWN:
        return "is set by the runner"
    if key.startswith(_FAMILIES):
        if "stall" in key:
            return "would silence or postpone stall warnings, which end a wedged run early"
        return None
    if key not in _KNOBS:
        return (
            "is not on the allow-list of boot parameters a side may set: "
            f"{', '.join(f + '*' for f in _FAMILIES)} (not *stall*), {', '.join(_KNOBS)}"
        )
    pattern = _KNOBS[key]
    if pattern is None:
        return None if p.value is None else "takes no value"
    if p.value is None:
        return None if key in _VALUE_OPTIONAL else f"needs a value ({pattern})"
    return None if re.fullmatch(pattern, p.value) else f"must be {pattern}, not {p.value!r}"
