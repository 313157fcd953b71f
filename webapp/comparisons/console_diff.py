"""A comparison's console differences: the kernel's complaints (engine/run/signatures.py)
that one side's runs print and the other side's never do, per benchmark. Part of the read
model (summary.py): the report, the API's summary and the mail read them from here.

Which runs count: every run that ended with a console of the kernel's own ending (ok, or
failed: a panic's console is evidence too), untraced (a diagnostic run boots another
command line). A signature in some of one side's runs and none of the other's is a
difference; in most of that side's runs (more than half) it is a finding, shown beside the
reliability rows: the kernel reliably says something the other never says. A signature
both sides print, however unequally, is not listed: rates of a message both kernels print
are noise at these run counts, and the failure-rate test covers the fatal ones.
"""

from collections import defaultdict
from dataclasses import dataclass

from engine.run import signatures
from webapp.comparisons.models import Comparison, Run
from webapp.states import Result


@dataclass(frozen=True)
class ConsoleDifference:
    benchmark: str
    signature: str
    side: str  # the side whose runs print it ("B": new in B; "A": B no longer prints it)
    runs: int  # that side's runs that printed it
    scanned: int  # that side's runs scanned
    other_scanned: int  # the other side's runs scanned (none printed it)
    occurrences: int  # lines, over that side's runs
    example: str  # its first line as printed, timestamp stripped
    finding: bool  # in more than half of that side's runs

    @property
    def other(self) -> str:
        return "A" if self.side == "B" else "B"

    @property
    def text(self) -> str:
        """One line for mail and terminal: where it is, how often, where it is not."""
        return (f"{self.signature}: in {self.runs} of {self.scanned} {self.side} runs, "
                f"none of {self.other_scanned} {self.other} runs")  # fmt: skip


def console_differences(c: Comparison) -> list[ConsoleDifference]:
    """The comparison's differences, findings first, then B's new ones, then A's, each by
    how many runs print it."""
    # benchmark -> side -> signature -> [runs, occurrences, example]; and runs scanned.
    seen: dict[str, dict[str, dict[str, list]]] = defaultdict(lambda: {"A": {}, "B": {}})
    scanned: dict[str, dict[str, int]] = defaultdict(lambda: {"A": 0, "B": 0})
    for bench, side, scan in _scans(c):
        scanned[bench][side] += 1
        for f in scan.found:
            entry = seen[bench][side].setdefault(f.signature, [0, 0, f.example])
            entry[0] += 1
            entry[1] += f.count
    out = []
    for bench, sides in seen.items():
        n = scanned[bench]
        if not n["A"] or not n["B"]:
            continue  # nothing to differ from
        for side, other in (("A", "B"), ("B", "A")):
            for sig, (runs, occurrences, example) in sides[side].items():
                if sig in sides[other]:
                    continue
                out.append(ConsoleDifference(
                    bench, sig, side, runs, n[side], n[other], occurrences, example,
                    finding=2 * runs > n[side],
                ))  # fmt: skip
    out.sort(key=lambda d: (not d.finding, d.side != "B", -d.runs, d.benchmark, d.signature))
    return out


def _scans(c: Comparison) -> list[tuple[str, str, signatures.Scan]]:
    """(benchmark, side, scan) of every counted run; an older run, stored before runs were
    scanned, is scanned from the console kept in the database."""
    runs = Run.objects.filter(comparison=c, traced=False, result__in=(Result.OK, Result.FAILED))
    out = []
    for bench, side, stored in runs.filter(console_signatures__isnull=False).values_list(
        "benchmark", "side", "console_signatures"
    ):
        if (scan := signatures.from_json(stored)) is not None:
            out.append((bench, side, scan))
    older = runs.filter(console_signatures__isnull=True).exclude(console_log="")
    for bench, side, console in older.values_list("benchmark", "side", "console_log"):
        out.append((bench, side, signatures.scan(console)))
    return out


def dicts(c: Comparison) -> list[dict[str, object]]:
    """The differences as the API's summary has them (docs/api/README.md)."""
    return [
        {"benchmark": d.benchmark, "signature": d.signature, "side": d.side, "runs": d.runs,
         "scanned": d.scanned, "other_scanned": d.other_scanned,
         "occurrences": d.occurrences, "example": d.example, "finding": d.finding}
        for d in console_differences(c)
    ]  # fmt: skip
