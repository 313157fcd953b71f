"""Every real console fixture against its golden file (benchmarks/golden.py): what
Benchmark.measure() gives for it, stored beside it. Regenerate after a deliberate parser
change with `.venv/bin/python -m benchmarks.golden --update` (or `make golden`) and review
the diff."""

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import golden
from benchmarks.registry import BENCHMARKS

CASES = golden.cases()
FIX = "sync_rcu_latency/fixtures"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_parser_gives_what_the_golden_file_stores(case):
    problems = golden.check(case)
    assert not problems, "\n".join(problems)


def test_every_registered_benchmark_has_a_real_console_it_parses():
    parsed = set()
    for case in CASES:
        if case.expected.exists():
            doc = json.loads(case.expected.read_text())
            if "metrics" in doc:
                parsed.add(doc["benchmark"])
    assert parsed == set(BENCHMARKS)


# The golden check itself, on copies of real fixtures: it must be able to fail.
@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / FIX).mkdir(parents=True)
    for name in ("x86_64-pc-tcg.log", "x86_64-pc-tcg.expected.json"):
        shutil.copy(golden.ROOT / FIX / name, tmp_path / FIX / name)
    return tmp_path


def _problems(root: Path) -> list[str]:
    return [p for c in golden.cases(root) for p in golden.check(c)]


def test_the_copy_matches(root):
    assert _problems(root) == []


def test_one_value_changed_by_a_nanosecond_fails(root):
    path = root / FIX / "x86_64-pc-tcg.expected.json"
    doc = json.loads(path.read_text())
    doc["metrics"]["writer_duration"][7] += 1e-6
    path.write_text(json.dumps(doc))
    [problem] = _problems(root)
    assert "metric writer_duration[7]: got" in problem


def test_a_fixture_without_an_expected_file_fails(root):
    shutil.copy(golden.ROOT / FIX / "x86_64-pc-tcg-exp.log", root / FIX)
    [problem] = _problems(root)
    assert "x86_64-pc-tcg-exp.log: no expected file" in problem


def test_an_expected_file_whose_fixture_is_gone_fails(root):
    (root / FIX / "x86_64-pc-tcg.log").unlink()
    [problem] = _problems(root)
    assert "its fixture x86_64-pc-tcg.log is gone" in problem


def test_a_console_mapped_to_the_wrong_variant_fails(root):
    path = root / FIX / "x86_64-pc-tcg.expected.json"
    path.write_text(path.read_text().replace('"sync-rcu-latency"', '"smt-toggle"'))
    [problem] = _problems(root)
    assert "expected metrics" in problem
    assert "got ParseError 'no RCUBENCH-BEGIN line for smt-toggle" in problem


def test_no_stored_context_for_a_parser_that_reads_one_fails(tmp_path):
    folder = tmp_path / "boot_time/fixtures"
    folder.mkdir(parents=True)
    shutil.copy(golden.ROOT / "boot_time/fixtures/x86_64-pc-tcg.log", folder)
    doc = json.loads((golden.ROOT / "boot_time/fixtures/x86_64-pc-tcg.expected.json").read_text())
    doc["run_context"] = None
    (folder / "x86_64-pc-tcg.expected.json").write_text(json.dumps(doc))
    [problem] = _problems(tmp_path)
    assert "boot-time's parser reads the run context, and none is stored" in problem
