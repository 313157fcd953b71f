"""What a target of perf/stats_simulation.py is: a seeded simulation and the checks on its
columns. Apart from the script so that targets may live in modules of their own
(perf/_sim_rules.py) and be registered in its TARGETS."""

from collections.abc import Callable
from dataclasses import dataclass

RATE_SIMS = 2_000  # STATS.md: rates near 5%
PRECISE_SIMS = 10_000  # STATS.md: power, and targets within 2 points of their limit

# (target name, seed index) -> the numbers of one simulated comparison, one per column
Sim = Callable[[str, int], list[float]]


@dataclass(frozen=True)
class Check:
    label: str
    column: int  # of the sim's list
    unit: str = "%"  # "%": the column is 0/1, its mean a rate; "runs": a mean of runs/side
    lo: float | None = None  # both None: a reference line (REF), no target
    hi: float | None = None

    @property
    def bound(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"[{self.lo:g}, {self.hi:g}]"
        return f">= {self.lo:g}" if self.lo is not None else f"<= {self.hi:g}"


@dataclass(frozen=True)
class Target:
    name: str
    sim: Sim
    checks: tuple[Check, ...]
    sims: int = RATE_SIMS  # default number of simulations (see the script's docstring)
    requires: str = ""  # "module:attribute" the sim imports lazily; SKIP while missing


def ref(label: str, column: int, unit: str = "%") -> Check:
    """A reference line: printed with its value, no target."""
    return Check(f"{label} (reference)", column, unit)
