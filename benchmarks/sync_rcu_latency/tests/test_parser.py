"""The rcuscale parser on real consoles cut or garbled (what each whole console parses to
is its golden file, benchmarks/tests/test_golden.py)."""

import json
import statistics
import time
from pathlib import Path

import pytest

from benchmarks.registry import get
from benchmarks.spec import ParseError
from benchmarks.sync_rcu_latency.parser import params, parse

FIXTURES = Path(__file__).parents[1] / "fixtures"
PPC = (FIXTURES / "ppc64le-pseries-tcg-qemu.log").read_text(errors="replace")


def test_the_test_parameters_are_read_from_the_start_line():
    got = params(PPC)
    assert (got["nwriters"], got["gp_exp"], got["shutdown"]) == ("1", "0", "1")


def test_a_console_cut_off_during_the_durations_is_an_error_not_a_short_sample():
    cut = PPC[: PPC.index("writer-duration:    57")]
    with pytest.raises(ParseError, match=r"writer 0: 57 writer-duration lines for gps 101"):
        parse(cut)


def test_a_console_cut_off_before_the_summary_is_an_error():
    with pytest.raises(ParseError, match="no rcuscale summary line"):
        parse(PPC[: PPC.index("rcu-scale: start:")])


def test_a_console_without_rcuscale_is_an_error():
    with pytest.raises(ParseError, match="rcuscale did not run"):
        parse(PPC[: PPC.index("rcu-scale:--- Start of test")])


def test_a_duplicated_duration_line_is_garbled_output():
    line = next(ln for ln in PPC.splitlines() if "writer-duration:    10 " in ln)
    with pytest.raises(ParseError, match="duration 10 appears twice"):
        parse(PPC.replace(line, f"{line}\n{line}"))


def test_rcuscales_own_complaint_voids_the_run():
    # The message rcuscale prints when every grace period was expedited (rcuscale.c).
    complaint = "[    2.1] rcu-scale:!!! All grace periods expedited, no normal ones to measure!"
    with pytest.raises(ParseError, match="rcuscale reports: All grace periods expedited"):
        parse(
            PPC.replace(
                "[    2.143812] rcu-scale: writer 0 gps",
                complaint + "\n[    2.143812] rcu-scale: writer 0 gps",
            )
        )


@pytest.mark.parametrize("expected", sorted(FIXTURES.glob("*.expected.json")), ids=lambda p: p.name)
def test_each_console_ran_the_variant_its_golden_file_maps_it_to(expected):
    # The golden files pair a console with a benchmark (or preset); rcuscale says which one
    # it ran: every rcuscale parameter the benchmark sets, as rcuscale printed it.
    benchmark = get(json.loads(expected.read_text())["benchmark"]).spec
    log = expected.with_name(expected.name.removesuffix(".expected.json") + ".log")
    ran = params(log.read_text(errors="replace"))
    own = dict(t.removeprefix("rcuscale.").split("=") for t in benchmark.cmdline.split())
    assert {k: ran[k] for k in own} == own
    assert ran["gp_exp"] == own.get("gp_exp", "0")
    assert ran["writer_holdoff"] == own.get("writer_holdoff", "0")


def test_expedited_grace_periods_are_faster_than_normal_ones_on_the_same_kernel():
    normal = parse((FIXTURES / "x86_64-pc-tcg.log").read_text())
    expedited = parse((FIXTURES / "x86_64-pc-tcg-exp.log").read_text())
    assert statistics.median(expedited["writer_duration"]) < statistics.median(
        normal["writer_duration"]
    )


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # Each raised ValueError or MemoryError before, and the run ended "lost".
        (" nwriters=1", " nwriters=abc", "nwriters='abc': not a number"),
        ("writer 0 gps: 101", "writer 0 gps: 100000000", r"writer 0 gps=100000000: out of range"),
        (" nwriters=1", " nwriters=100000000000", r"nwriters=100000000000: out of range"),
        (" nwriters=1", " nwriters=" + "9" * 5000, r"nwriters=9{40}: out of range"),
        ("writer 0 gps: 101", "writer 99999 gps: 101", r"writer=99999: out of range"),
        ("writer-duration:    10 ", "writer-duration: 99999 ", "duration index=99999: out of"),
        ("duration: 731649363", "duration: " + "7" * 30, r"test duration \(ns\)=7{30}: out of"),
    ],
    ids=["nwriters-abc", "gps-1e8", "nwriters-1e11", "nwriters-5000-digits", "writer-99999",
         "index-99999", "duration-30-digits"],
)  # fmt: skip
def test_absurd_numbers_are_parse_errors_refused_before_anything_is_sized(old, new, reason):
    assert old in PPC
    started = time.monotonic()
    with pytest.raises(ParseError, match=reason):
        parse(PPC.replace(old, new, 1))
    assert time.monotonic() - started < 1.0  # refused, not allocated and compared


def test_calls_per_grace_period_is_rcuscales_calls_over_its_grace_periods():
    one = parse((FIXTURES / "x86_64-pc-tcg.log").read_text())
    many = parse((FIXTURES / "x86_64-pc-tcg--many-writers.log").read_text())
    # One writer: 101 calls, each its own grace period or more (121: others began meanwhile).
    assert (one["gps"], one["batches"], one["updates_per_gp"]) == ((101.0,), (121.0,), (101 / 121,))
    # 16 writers' concurrent requests share grace periods: 1,651 calls in 211.
    assert (many["gps"], many["batches"]) == ((1651.0,), (211.0,))
    assert many["updates_per_gp"] == (1651 / 211,)


def test_a_summary_with_no_grace_period_is_refused_not_divided_by():
    line = next(ln for ln in PPC.splitlines() if " batches: " in ln)
    with pytest.raises(ParseError, match="counts 0 grace periods"):
        parse(PPC.replace(line, line.rsplit(" ", 1)[0] + " 0"))
