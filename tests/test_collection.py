"""Every test module in the tree is collected by a plain `pytest` run.

pytest skips folders named like build/ by default; this guard notices any test file the
configured run would silently leave out.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_module_is_collected():
    on_disk = {
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("test_*.py")
        if not any(part.startswith(".") or part == "var" for part in p.relative_to(ROOT).parts)
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    collected = {line.split("::")[0] for line in result.stdout.splitlines() if "::" in line}
    assert on_disk - collected == set(), result.stdout[-2000:]
