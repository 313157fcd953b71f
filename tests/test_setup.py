"""The set-up script is idempotent: after `make test` ran it once, a second run does nothing."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_setup_second_run_reports_nothing_to_do():
    result = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "setup: did" not in result.stdout, result.stdout
    assert result.stdout.strip().splitlines()[-1] == "setup: nothing to do"
