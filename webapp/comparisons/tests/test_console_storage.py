"""The run service's record of a finished boot, fed hostile consoles the way the runner
hands them over (RunOutcome): any byte, any length, garbled benchmark output. Each ends the
run with its outcome and stores its console; none loses the run. And console files go
with their runs."""

import json
import re
from pathlib import Path

import pytest

from benchmarks.rcutrace.parser import split
from benchmarks.rcutrace.parser import split as split_trace
from benchmarks.registry import Benchmark, get
from engine.run.console import RunOutcome
from engine.run.hostload import HostLoad
from tests.support.factories import RunFactory
from webapp.comparisons import consoles, runs
from webapp.comparisons.consoles import prune_console_dirs
from webapp.comparisons.models import Measurement, Run
from webapp.states import Result, State
from webapp.text import storable

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[3] / "benchmarks" / "sync_rcu_latency" / "fixtures"
# As the runner decodes a console: invalid UTF-8 as surrogate escapes, nothing replaced.
CONSOLE = (FIXTURES / "x86_64-pc-tcg.log").read_bytes().decode("utf-8", "surrogateescape")
HOSTILE = "[    9.9] \0\0 NUL and \udcff\udcfe not UTF-8 \udcc3( \x1b[31m\n"
SYNC = get("sync-rcu-latency")


@pytest.fixture
def small_caps(settings):
    settings.RCUBENCH_CONSOLE_MAX_BYTES = 16 * 2**20
    settings.RCUBENCH_CONSOLE_KEEP_BYTES = 2**20


def _record(console: str, outcome: str = "ok", reason: str = "powered off",
            bench: Benchmark = SYNC) -> Run:  # fmt: skip
    run = RunFactory.create(state=State.RUNNING, benchmark=bench.spec.name)
    out = RunOutcome(outcome, reason, console, wall_seconds=12.5, ready_seconds=1.5)
    assert runs.record_outcome(run, bench, out) is not None
    run.refresh_from_db()
    assert run.state == State.DONE
    return run


def test_nul_and_invalid_utf8_in_a_console_are_stored_visibly_with_the_run_data(small_caps):
    # psycopg refused "\0" (DataError), and the run ended "lost".
    run = _record(HOSTILE + CONSOLE + HOSTILE)
    assert (run.result, run.error_code) == (Result.OK, ""), run.error_message
    shown = "[    9.9] \u2400\u2400 NUL and \\xff\\xfe not UTF-8 \\xc3( \x1b[31m\n"
    # Without the empty ftrace dump the tracing kernel prints (kept apart, as every dump)
    assert run.console_log == shown + storable(split(CONSOLE)[0]) + shown
    assert len(Measurement.objects.get(run=run, metric="writer_duration").samples) == 101
    assert run.wall_seconds == 12.5


def test_a_100_mb_console_is_stored_as_its_head_and_tail_with_what_was_cut(small_caps):
    flood = HOSTILE + "\0\udcff" * (50 * 2**20) + "[  99.0] Kernel panic - not syncing: x\n"
    run = _record(flood, "panic", "Kernel panic - not syncing: x\0")
    assert (run.result, run.error_code) == (Result.FAILED, "panic")
    assert run.error_message == "Kernel panic - not syncing: x\u2400"
    cut = 2 * 50 * 2**20 + len(HOSTILE.encode("utf-8", "surrogateescape")) + 39 - 2**20
    head, marker, tail = re.split(r"(\n\[rcubench: \d+ bytes of console cut here\]\n)",
                                  run.console_log)  # fmt: skip
    assert marker == f"\n[rcubench: {cut} bytes of console cut here]\n"
    assert head.startswith("[    9.9] \u2400\u2400 NUL and \\xff\\xfe not UTF-8")
    assert tail.endswith("\u2400\\xff[  99.0] Kernel panic - not syncing: x\n")
    assert not Measurement.objects.filter(run=run).exists()


def test_an_ok_console_past_the_cap_is_console_overflow_never_data(small_caps, settings):
    settings.RCUBENCH_CONSOLE_MAX_BYTES = 2**20
    run = _record(CONSOLE + "A" * 2**20)
    assert (run.result, run.error_code) == (Result.FAILED, "console-overflow")
    assert run.error_message == f"the console passed its cap of {2**20} bytes"
    assert not Measurement.objects.filter(run=run).exists()


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # ValueError and MemoryError before: the run ended "lost".
        (" nwriters=1", " nwriters=abc", "nwriters='abc': not a number"),
        ("writer 0 gps: 101", "writer 0 gps: 100000000", "writer 0 gps=100000000: out of range"),
    ],
)
def test_garbled_benchmark_output_is_parse_failed_with_the_reason(small_caps, old, new, reason):
    run = _record(CONSOLE.replace(old, new, 1))
    assert (run.result, run.error_code) == (Result.FAILED, "parse-failed")
    assert reason in run.error_message
    assert new.strip() in run.console_log
    assert not Measurement.objects.filter(run=run).exists()


@pytest.mark.parametrize("error", [ValueError("bad literal"), MemoryError(), KeyError("x")])
def test_any_exception_from_a_parser_is_parse_failed_naming_it(small_caps, error):
    def parser(console, ctx):
        raise error

    run = _record(CONSOLE, bench=Benchmark(SYNC.spec, parser))
    assert (run.result, run.error_code) == (Result.FAILED, "parse-failed")
    assert run.error_message.startswith(f"sync-rcu-latency parser raised {type(error).__name__}")


def test_a_long_hostile_reason_is_stored_short(small_caps):
    run = _record(CONSOLE, "panic", "BUG: " + "\0" * 10**6)
    assert run.error_message == ("BUG: " + "\u2400" * 10**6)[:2000]


# --- console files go with their runs -----------------------------------------------------


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.RCUBENCH_DATA_DIR = str(tmp_path)
    return tmp_path


def _console_file(run_id: int) -> Path:
    path = consoles.console_dir(run_id) / "console.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"console\n")
    (path.parent / "console.log.0").write_bytes(b"rotated\n")
    return path


def test_deleting_a_run_or_its_comparison_removes_its_console_files(
    data_dir, django_capture_on_commit_callbacks
):
    one, two, other = RunFactory.create(), RunFactory.create(), RunFactory.create()
    one_file, two_file, other_file = (_console_file(run.pk) for run in (one, two, other))
    with django_capture_on_commit_callbacks(execute=True):
        one.delete()
        two.comparison.delete()  # cascades to its runs
    assert not one_file.parent.exists()
    assert not two_file.parent.exists()
    assert other_file.read_bytes() == b"console\n"


def test_the_prune_task_removes_console_dirs_whose_run_is_gone_and_only_those(data_dir):
    kept = RunFactory.create()
    kept_file = _console_file(kept.pk)
    orphans = [_console_file(pk) for pk in (kept.pk + 1000, kept.pk + 1001)]
    (data_dir / "runs" / "images").mkdir()  # not a run's: left alone
    assert prune_console_dirs() == 2
    assert not any(path.parent.exists() for path in orphans)
    assert kept_file.exists()
    assert (data_dir / "runs" / "images").is_dir()
    assert prune_console_dirs() == 0


# --- the host's load during the run ------------------------------------------------------


def _host(busy: float | None, steal: float = 0.01, pinned: bool = False) -> HostLoad:
    return HostLoad(busy_share=busy, steal_share=steal, load_avg=1.25, host_cpus=2,
                    seconds=3.0, pinned=pinned)  # fmt: skip


def _record_host(host: HostLoad | None, outcome: str = "ok", reason: str = "powered off") -> Run:
    run = RunFactory.create(state=State.RUNNING, benchmark=SYNC.spec.name)
    out = RunOutcome(outcome, reason, CONSOLE, 12.5, 1.5, host)
    assert runs.record_outcome(run, SYNC, out) is not None
    run.refresh_from_db()
    return run


def test_a_run_beside_a_busy_host_is_stored_with_its_load_and_flagged_contended(settings):
    settings.RCUBENCH_CONTENTION_SHARE = 0.25
    run = _record_host(_host(0.5, pinned=True))
    assert (run.result, run.contended, run.pinned) == (Result.OK, True, True)
    assert (run.host_busy_share, run.host_steal_share, run.host_load_avg) == (0.5, 0.01, 1.25)


def test_contention_is_the_configured_share_and_not_above_it_is_quiet(settings):
    settings.RCUBENCH_CONTENTION_SHARE = 0.5
    assert _record_host(_host(0.5)).contended is False
    assert _record_host(_host(0.51)).contended is True


def test_a_failed_run_keeps_its_host_load_too(settings):
    settings.RCUBENCH_CONTENTION_SHARE = 0.25
    run = _record_host(_host(0.75), "timeout", "still running after 900 s")
    assert (run.result, run.error_code) == (Result.FAILED, "timeout")
    assert (run.host_busy_share, run.contended) == (0.75, True)


def test_a_run_whose_qemu_was_not_found_has_steal_but_no_contention_verdict():
    run = _record_host(_host(None, steal=0.2))
    assert (run.host_busy_share, run.contended, run.host_steal_share) == (None, None, 0.2)


def test_a_run_without_a_host_record_stores_nothing_of_it():
    run = _record_host(None)
    assert run.result == Result.OK
    got = (run.host_busy_share, run.host_steal_share, run.host_load_avg, run.contended,
           run.pinned)  # fmt: skip
    assert got == (None, None, None, None, None)


def test_the_runs_log_line_carries_its_host_load(settings, caplog):
    settings.RCUBENCH_CONTENTION_SHARE = 0.25
    caplog.set_level("INFO")
    run = _record_host(_host(0.123456))
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    done = [x for x in lines if x.get("event") == "run state" and x.get("run") == run.pk
            and x.get("state") == State.DONE]  # fmt: skip
    assert len(done) == 1
    assert done[0]["host_busy_share"] == 0.123
    assert (done[0]["contended"], done[0]["host_load_avg"], done[0]["pinned"]) == (
        False,
        1.25,
        False,
    )


TRACED = Path(__file__).parents[3] / "benchmarks" / "rcutrace" / "fixtures"


def test_a_traced_runs_dump_is_kept_apart_and_its_console_measures_as_an_untraced_one(small_caps):
    traced = (TRACED / "x86_64-pc-tcg.log").read_text()
    run = _record(traced)
    assert (run.result, run.error_code) == (Result.OK, ""), run.error_message
    assert "Dumping ftrace buffer:" in run.trace_log
    assert "Dumping ftrace buffer:" not in run.console_log
    assert run.trace_log.count("rcu_grace_period:") == traced.count("us : rcu_grace_period:")
    assert len(run.console_log) + len(run.trace_log) == len(traced) - 1  # the joining newline
    assert len(Measurement.objects.get(run=run, metric="writer_duration").samples) == 101
    # Its parse is kept for the report: the golden file's, as JSON stores it.
    golden = json.loads((TRACED / "x86_64-pc-tcg.trace.json").read_text())
    assert run.trace_summary == golden


def test_a_dump_the_trace_parser_chokes_on_costs_the_trace_not_the_run(small_caps, monkeypatch):
    def boom(dump: str, console: str) -> None:
        raise RuntimeError("a parser bug on hostile output")

    monkeypatch.setattr(runs, "parse_trace", boom)
    run = _record((TRACED / "x86_64-pc-tcg.log").read_text())
    assert (run.result, run.error_code) == (Result.OK, ""), run.error_message
    assert run.trace_summary == {
        "usable": False,
        "error": "RuntimeError: a parser bug on hostile output",
    }
    assert run.trace_log  # the raw dump is kept for a reader to look at


def test_an_empty_dump_is_taken_off_and_no_trace_is_kept(small_caps):
    # The tracing kernel without events: what its verdict runs print.
    built = (FIXTURES / "x86_64-pc-tcg-tracing-built.log").read_text()
    run = _record(built)
    assert run.trace_log == ""
    assert run.trace_summary is None
    assert "ftrace buffer empty" not in run.console_log
    assert len(Measurement.objects.get(run=run, metric="writer_duration").samples) == 101


def test_a_traced_console_past_the_cap_is_console_overflow_though_its_dump_is_taken_off(
    small_caps, settings
):
    traced = (TRACED / "x86_64-pc-tcg.log").read_text()
    without_dump, _ = split_trace(traced)
    # Room for the console without its dump, not for all the kernel printed.
    settings.RCUBENCH_CONSOLE_MAX_BYTES = len(without_dump.encode()) + 1000
    run = _record(traced)
    assert (run.result, run.error_code) == (Result.FAILED, "console-overflow")
