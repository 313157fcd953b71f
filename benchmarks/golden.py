"""Golden files for the parser fixtures, as lkp-tests keeps them: every real console
benchmarks/<bench>/fixtures/<name>.log has <name>.expected.json beside it, and one generic
test (benchmarks/tests/test_golden.py) holds today's parsers to them.

An expected file says which registered benchmark the console belongs to (a fixture may be
a variant's: sync_rcu_latency's *-exp.log are sync-rcu-latency-exp's), the run context
the console is measured with, and what `Benchmark.measure()` gives for it:

    {"benchmark": "sync-rcu-latency-exp",
     "run_context": null | {"wall_seconds": s, "ready_seconds": s | null, "recorded": bool},
     "metrics": {"<metric>": [<float>, ...], ...}    (or "parse_error": "<message>")}

- run_context null: the host's view of the run was not kept when the console was captured,
  and the parser does not read it; the check proves the latter by measuring the console
  under two different contexts and requiring the same outcome.
- recorded true: the host's wall and READY times of that very boot, as run_vm returned them.
- recorded false: not kept at capture, but the parser needs one; the values are stand-ins
  (so a metric taken from them checks the parser's arithmetic, not a measurement).
- parse_error: a real console the benchmark must refuse (e.g. a target without SMT).

Floats are stored as Python's shortest round-trip repr and compared exactly: a parser
change that moves any value by any amount is a golden-file change, seen in review.

    .venv/bin/python -m benchmarks.golden            check every fixture (exit 1 on problems)
    .venv/bin/python -m benchmarks.golden --update   rewrite the outcomes from the parsers
    .venv/bin/python -m benchmarks.golden --add FIXTURE --benchmark NAME
        [--wall-seconds S --ready-seconds S [--stand-in]]   a new fixture's expected file
"""

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.registry import BENCHMARKS, get
from benchmarks.spec import Parsed, ParseError, RunContext

ROOT = Path(__file__).resolve().parent
SUFFIX = ".expected.json"
# Two contexts as different as the runner could report: a parser that reads the context
# cannot give the same outcome under both (boot-time refuses the first, for one).
_PROBES = (RunContext(wall_seconds=0.0, ready_seconds=None), RunContext(1e4, 1e3))


@dataclass(frozen=True)
class Case:
    """A fixture and its expected file; either may be missing, which is a problem."""

    fixture: Path
    expected: Path

    @property
    def name(self) -> str:
        return f"{self.fixture.parent.parent.name}/{self.fixture.name}"


@dataclass(frozen=True)
class Outcome:
    """What measuring a console gave: metrics, or the ParseError's message."""

    metrics: Parsed | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        if self.metrics is None:
            return {"parse_error": self.error}
        return {"metrics": {k: list(v) for k, v in sorted(self.metrics.items())}}


def expected_path(fixture: Path) -> Path:
    return fixture.with_name(fixture.name.removesuffix(".log") + SUFFIX)


def cases(root: Path = ROOT) -> list[Case]:
    """Every fixture and every expected file under root/*/fixtures, paired by name."""
    fixtures = set(root.glob("*/fixtures/*.log"))
    orphans = {
        p.with_name(p.name.removesuffix(SUFFIX) + ".log")
        for p in root.glob(f"*/fixtures/*{SUFFIX}")
    }
    return [Case(f, expected_path(f)) for f in sorted(fixtures | orphans)]


def console(fixture: Path) -> str:
    # As the runner hands a console over: invalid UTF-8 kept as surrogate escapes.
    return fixture.read_bytes().decode("utf-8", "surrogateescape")


def context(stored: dict[str, Any] | None) -> RunContext | None:
    if stored is None:
        return None
    return RunContext(wall_seconds=stored["wall_seconds"], ready_seconds=stored["ready_seconds"])


def measure(benchmark: str, text: str, ctx: RunContext) -> Outcome:
    try:
        return Outcome(metrics=get(benchmark).measure(text, ctx))
    except ParseError as exc:
        return Outcome(error=str(exc))


def outcome(benchmark: str, text: str, stored_ctx: dict[str, Any] | None) -> Outcome:
    """The console measured with its stored context; with none stored, under two probe
    contexts, which must agree (else ValueError: the parser reads the context)."""
    ctx = context(stored_ctx)
    if ctx is not None:
        return measure(benchmark, text, ctx)
    first, second = (measure(benchmark, text, probe) for probe in _PROBES)
    if first != second:
        raise ValueError(
            f"{benchmark}'s parser reads the run context, and none is stored: record the "
            "boot's wall and ready seconds in run_context"
        )
    return first


def render(benchmark: str, stored_ctx: dict[str, Any] | None, result: Outcome) -> str:
    doc = {"benchmark": benchmark, "run_context": stored_ctx, **result.as_json()}
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"


def _how(case: Case) -> str:
    return f"add it: .venv/bin/python -m benchmarks.golden --add {case.fixture} --benchmark NAME"


def check(case: Case) -> list[str]:
    """What is wrong with one case (empty when the parser gives what is stored)."""
    if not case.fixture.exists():
        return [f"{case.expected}: its fixture {case.fixture.name} is gone (delete the file)"]
    if not case.expected.exists():
        return [f"{case.fixture}: no expected file {case.expected.name}; {_how(case)}"]
    doc = json.loads(case.expected.read_text())
    benchmark = doc.get("benchmark")
    if benchmark not in BENCHMARKS:
        return [f"{case.expected}: benchmark {benchmark!r} is not registered"]
    try:
        got = outcome(benchmark, console(case.fixture), doc.get("run_context"))
    except ValueError as exc:
        return [f"{case.expected}: {exc}"]
    want = Outcome(
        metrics={k: tuple(v) for k, v in doc["metrics"].items()} if "metrics" in doc else None,
        error=doc.get("parse_error"),
    )
    return [f"{case.name}: {line}" for line in _differences(want, got)]


def _differences(want: Outcome, got: Outcome) -> list[str]:
    if want.metrics is None or got.metrics is None:
        if want == got:
            return []
        return [f"expected {_said(want)}, got {_said(got)}"]
    problems = []
    for name in sorted(set(want.metrics) | set(got.metrics)):
        w, g = want.metrics.get(name), got.metrics.get(name)
        if w == g:
            continue
        if w is None or g is None:
            problems.append(f"metric {name}: {'not expected' if w is None else 'missing'}")
        elif len(w) != len(g):
            problems.append(f"metric {name}: {len(g)} values, expected {len(w)}")
        else:
            i = next(i for i, (a, b) in enumerate(zip(w, g, strict=True)) if a != b)
            problems.append(f"metric {name}[{i}]: got {g[i]!r}, expected {w[i]!r}")
    return problems


def _said(result: Outcome) -> str:
    if result.metrics is None:
        return f"ParseError {result.error!r}"
    return f"metrics {sorted(result.metrics)}"


def update(root: Path = ROOT) -> list[str]:
    """Rewrite each expected file's outcome from today's parser; the problems that need a
    person (a fixture without an expected file, an orphan, a parse that now fails or now
    passes, where the other was expected) are returned, not written."""
    problems = []
    for case in cases(root):
        if not case.fixture.exists() or not case.expected.exists():
            problems += check(case)
            continue
        doc = json.loads(case.expected.read_text())
        try:
            got = outcome(doc["benchmark"], console(case.fixture), doc.get("run_context"))
        except (KeyError, ValueError) as exc:
            problems.append(f"{case.expected}: {exc}")
            continue
        if ("metrics" in doc) != (got.metrics is not None):
            problems.append(f"{case.name}: not rewritten, it now gives {_said(got)}")
            continue
        text = render(doc["benchmark"], doc.get("run_context"), got)
        if text != case.expected.read_text():
            case.expected.write_text(text)
            print(f"updated {case.expected}")
    return problems


def add(
    fixture: Path, benchmark: str, wall: float | None, ready: float | None, recorded: bool = True
) -> Path:
    """Start the expected file of a new fixture, with the host's times of its boot if known
    (`recorded`) or stand-ins where the parser needs some and they were not kept."""
    case = Case(fixture.resolve(), expected_path(fixture.resolve()))
    if not case.fixture.exists():
        raise SystemExit(f"no fixture {fixture}")
    if case.expected.exists():
        raise SystemExit(f"{case.expected} exists: use --update")
    get(benchmark)  # a KeyError names the registered ones
    stored = None
    if wall is not None:
        stored = {"wall_seconds": wall, "ready_seconds": ready, "recorded": recorded}
    try:
        result = outcome(benchmark, console(case.fixture), stored)
    except ValueError as exc:
        raise SystemExit(f"{fixture}: {exc} (--wall-seconds, --ready-seconds)") from None
    case.expected.write_text(render(benchmark, stored, result))
    print(f"wrote {case.expected}: {_said(result)}")
    return case.expected


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check or regenerate the parser golden files.")
    parser.add_argument("--update", action="store_true", help="rewrite outcomes from parsers")
    parser.add_argument("--add", type=Path, metavar="FIXTURE", help="a new fixture's .log")
    parser.add_argument("--benchmark", help="with --add: the registered benchmark it is for")
    parser.add_argument("--wall-seconds", type=float, help="with --add: run_vm's wall_seconds")
    parser.add_argument("--ready-seconds", type=float, help="with --add: run_vm's ready_seconds")
    parser.add_argument(
        "--stand-in", action="store_true", help="with --add: the times were not recorded"
    )
    args = parser.parse_args(argv)
    if args.add:
        if not args.benchmark:
            parser.error("--add needs --benchmark")
        add(args.add, args.benchmark, args.wall_seconds, args.ready_seconds, not args.stand_in)
        return 0
    problems = update() if args.update else [p for c in cases() for p in check(c)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"{len(cases())} fixtures match their golden files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
