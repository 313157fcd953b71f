"""perf/ scripts run as `python perf/<name>.py`, which puts perf/ first on sys.path: a
script named like a standard-library module shadows it for every other script there
(perf/bisect.py broke perf/web_load.py's `import random`, which imports `bisect`)."""

import sys
from pathlib import Path

PERF = Path(__file__).resolve().parents[1] / "perf"


def test_no_perf_script_is_named_like_a_standard_library_module():
    names = {p.stem for p in PERF.glob("*.py")}
    assert names
    assert not names & set(sys.stdlib_module_names)
