"""smt-toggle's parser on real consoles cut or garbled, and on one it must refuse (what
each whole console parses to is its golden file, benchmarks/tests/test_golden.py)."""

from pathlib import Path

import pytest

from benchmarks.smt_toggle.parser import parse
from benchmarks.spec import ParseError

CONSOLE = (Path(__file__).parents[1] / "fixtures" / "x86_64-pc-tcg.log").read_text()


def test_a_console_cut_before_the_end_line_is_an_error():
    with pytest.raises(ParseError, match="no RCUBENCH-END line for smt-toggle"):
        parse(CONSOLE[: CONSOLE.index("RCUBENCH-END")])


def test_a_lost_record_line_is_an_error():
    lost = "\n".join(ln for ln in CONSOLE.splitlines() if "RCUBENCH-RECORD on_ms" not in ln)
    with pytest.raises(ParseError, match="END says 5 records, the console has 4"):
        parse(lost)


def test_a_garbled_value_is_an_error():
    line = next(ln for ln in CONSOLE.splitlines() if "RCUBENCH-RECORD off_ms" in ln)
    with pytest.raises(ParseError, match="not a number"):
        parse(CONSOLE.replace(line, line.replace(".", "x", 1)))


def test_a_guest_without_smt_is_an_error_with_the_guests_reason():
    # ppc64le pseries under TCG on QEMU 7.2, which gives no SMT threads.
    fixture = Path(__file__).parents[1] / "fixtures" / "ppc64le-pseries-tcg-nosmt.log"
    ppc = fixture.read_text()
    with pytest.raises(
        ParseError, match=r"failed in the guest \(exit-3\): SMT control is 'notsupported'"
    ):
        parse(ppc)
