"""Golden files for the trace parser: every traced console fixtures/<name>.log has
<name>.trace.json beside it (what `parse_console` gives: counts, loss and the window's
per-run values), compared exactly by tests/test_parser.py. The same consoles also have
<name>.expected.json, benchmarks/golden.py's: the benchmark's own parser reads a traced
console as it reads an untraced one.

    .venv/bin/python -m benchmarks.rcutrace.golden            check (exit 1 on a difference)
    .venv/bin/python -m benchmarks.rcutrace.golden --update   rewrite them from the parser
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.rcutrace.parser import Trace, parse_console, summary

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUFFIX = ".trace.json"


def document(trace: Trace) -> dict[str, Any]:
    return {
        "events": trace.events,
        "lost_events": trace.lost_events,
        "grace_periods": len(trace.gps),
        "window": len(trace.window),
        "test_gps": trace.test_gps,
        "missing_gps": trace.missing_gps,
        "interior_unpaired": trace.interior_unpaired,
        "edge_unpaired": trace.edge_unpaired,
        "paired_share": trace.paired_share,
        "expedited": len(trace.exp_us),
        "expedited_lost": trace.exp_lost,
        "usable": trace.usable,
        "fqs_scans": {str(k): n for k, n in sorted(Counter(g.scans for g in trace.window).items())},
        "summary": summary(trace),
    }


def fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("*.log"))


def expected_path(fixture: Path) -> Path:
    return fixture.with_name(fixture.name.removesuffix(".log") + SUFFIX)


def render(fixture: Path) -> str:
    console = fixture.read_bytes().decode("utf-8", "surrogateescape")
    return json.dumps(document(parse_console(console)), indent=2, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true")
    args = parser.parse_args()
    status = 0
    for fixture in fixtures():
        text, path = render(fixture), expected_path(fixture)
        if args.update:
            path.write_text(text)
            print(f"wrote {path}")
        elif not path.exists() or path.read_text() != text:
            print(f"{fixture}: differs from {path.name} (run with --update and review)")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
