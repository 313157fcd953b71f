"""The kernel's complaints as signatures, on real consoles: a planted WARN_ON_ONCE's boot
(fixtures/README.md), every benchmark's captured boots, and hostile text."""

import time
from pathlib import Path

import pytest

from engine.run import signatures
from engine.run.signatures import MAX_LINES, MAX_SIGNATURES, SIGNATURE_MAX, scan, signature

FIXTURES = Path(__file__).parent / "fixtures"
BENCHMARK_CONSOLES = sorted(Path(__file__).parents[3].glob("benchmarks/*/fixtures/*.log"))
WARN_SIGNATURE = "WARNING at kernel/rcu/tree.c synchronize_rcu"


def _console(path: Path) -> str:
    # As the runner decodes a console: invalid UTF-8 as surrogate escapes.
    return path.read_bytes().decode("utf-8", "surrogateescape")


def _warn_line() -> str:
    console = _console(FIXTURES / "x86_64-warn-once.log")
    return next(line for line in console.splitlines() if "WARNING: CPU:" in line)


# pseries firmware's empty nvram partition: printed by both sides alike, never listed.
BENIGN = {"WARNING: nvram corruption detected: N-length partition"}


@pytest.mark.parametrize("arch", ["x86_64", "ppc64le"])
def test_a_planted_warn_on_once_is_one_signature_counted_once(arch):
    found = scan(_console(FIXTURES / f"{arch}-warn-once.log")).found
    warn = [f for f in found if f.signature not in BENIGN]
    assert [(f.signature, f.count) for f in warn] == [(WARN_SIGNATURE, 1)]
    assert warn[0].example.startswith("WARNING: CPU: 0 PID: ")
    assert "kernel/rcu/tree.c:4117 synchronize_rcu+0x" in warn[0].example  # as printed


def test_the_same_warning_at_another_line_and_cpu_and_pid_has_the_same_signature():
    # A patch that adds lines above an old WARN moves its line number: still the same one.
    line = _warn_line()
    moved = (line.replace("tree.c:", "tree.c:1").replace("CPU: ", "CPU: 3")
             .replace("PID: ", "PID: 9"))  # fmt: skip
    assert moved != line
    assert signature(line) == signature(moved) == WARN_SIGNATURE


@pytest.mark.parametrize("arch", ["x86_64", "ppc64le"])
def test_the_unpatched_kernel_of_the_same_comparison_complains_of_nothing_new(arch):
    assert {f.signature for f in scan(_console(FIXTURES / f"{arch}-base.log")).found} <= BENIGN


@pytest.mark.parametrize("path", BENCHMARK_CONSOLES, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_every_captured_benchmark_boot_has_at_most_the_known_benign_warning(path):
    assert {f.signature for f in scan(_console(path)).found} <= BENIGN


def test_a_real_rcu_stall_is_one_signature_without_its_cpu_or_tick_counts():
    # A planted 25 s RCU reader (fixtures/stall.mbox): the runner ended the run as panic.
    found = scan(_console(FIXTURES / "x86_64-stall.log")).found
    assert [(f.signature, f.count) for f in found] == [
        ("rcu: INFO: rcu_sched self-detected stall on CPU", 1)
    ]


def test_control_bytes_and_invalid_utf8_are_stripped_and_a_signature_is_capped():
    found = scan("[ 1.0] BUG: \x00\x1b[31m" + "\udcff" + "x" * 1000 + "\n").found
    assert found[0].signature == "BUG: [Nm" + "x" * (SIGNATURE_MAX - 8)
    assert "\x00" not in found[0].example
    assert "\udcff" not in found[0].example


def test_a_100_mb_line_is_scanned_in_linear_time():
    flood = "\0\udcff" * (50 * 2**20) + "[  99.0] Kernel panic - not syncing: x\n"
    started = time.monotonic()
    found = scan(flood).found
    assert time.monotonic() - started < 10  # 0.26 s measured; quadratic would be hours
    assert [f.signature for f in found] == ["Kernel panic - not syncing: x"]


def test_a_flood_of_distinct_complaints_is_cut_and_says_so():
    many = "".join(f"[ 1.0] WARNING: thing{chr(97 + i % 26)}{chr(97 + i // 26)}\n"
                   for i in range(MAX_SIGNATURES + 5))  # fmt: skip
    result = scan(many)
    assert len(result.found) == MAX_SIGNATURES
    assert result.truncated
    flood = scan("[ 1.0] BUG: x\n" * (MAX_LINES + 10))
    assert flood.found[0].count == MAX_LINES
    assert flood.truncated


def test_a_stored_scan_reads_back_and_anything_else_is_none():
    result = scan(_console(FIXTURES / "x86_64-warn-once.log"))
    assert signatures.from_json(result.as_json()) == result
    assert signatures.from_json(None) is None
    assert signatures.from_json({"found": "x"}) is None
    partly = signatures.from_json({"found": [["a", "1", "b"], ["s", 2, "e"]]})
    assert partly is not None
    assert partly.found == (signatures.Found("s", 2, "e"),)
