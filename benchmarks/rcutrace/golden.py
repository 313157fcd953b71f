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
from pathlib import Path

from benchmarks.rcutrace.parser import digest, parse_console

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUFFIX = ".trace.json"


def fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("*.log"))


def expected_path(fixture: Path) -> Path:
    return fixture.with_name(fixture.name.removesuffix(".log") + SUFFIX)


def render(fixture: Path) -> str:
    console = fixture.read_bytes().decode("utf-8", "surrogateescape")
    return json.dumps(digest(parse_console(console)), indent=2, sort_keys=True) + "\n"


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
