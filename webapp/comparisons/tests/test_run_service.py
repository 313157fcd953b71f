"""One run through the run service: a real boot of the session's x86_64 kernel under
libvirt, recorded as a Run with its Measurements, or with its failure and console."""

import pytest

from tests.support.factories import BuildFactory, ComparisonFactory, RunFactory
from webapp.comparisons import runs
from webapp.comparisons.models import Measurement, Run, Target
from webapp.states import Result, State

pytestmark = pytest.mark.django_db


@pytest.fixture
def comparison(x86_kernel, kernel_data_dir, settings):
    settings.RCUBENCH_DATA_DIR = str(kernel_data_dir)
    settings.RCUBENCH_BOOT_TIMEOUT_SECONDS = 120
    settings.RCUBENCH_BENCH_TIMEOUT_SECONDS = 120
    build = BuildFactory.create(
        state=State.DONE,
        result=Result.OK,
        sha=x86_kernel.sha,
        artifact_dir=str(x86_kernel.artifact_dir),
        artifact_key=x86_kernel.key,
    )
    return ComparisonFactory.create(build_a=build, target=Target.objects.get(name="qemu-x86_64"))


def _run(comparison, benchmark: str, cmdline: str = "") -> Run:
    comparison.cmdline_a = cmdline
    comparison.save()
    run = RunFactory.create(comparison=comparison, benchmark=benchmark, side="A")
    runs.execute_run(run.pk)
    run.refresh_from_db()
    return run


def test_a_run_stores_every_metric_of_its_benchmark(comparison, settings):
    run = _run(comparison, "sync-rcu-latency")
    assert (run.state, run.result, run.error_code) == (State.DONE, "ok", ""), run.error_message
    got = {m.metric: m for m in run.measurements.all()}
    window = {"gp_kthread_ms", "window_system_ms", "window_ctxt", "window_rcu_softirqs"}
    counts = {"writer_duration", "test_duration", "gps", "batches", "updates_per_gp"}
    assert set(got) == counts | window
    assert len(got["writer_duration"].samples) == got["gps"].samples[0]
    calls, gps = got["gps"].samples[0], got["batches"].samples[0]
    assert got["updates_per_gp"].samples == [calls / gps]
    assert got["writer_duration"].unit == "ms"
    assert "rcu-scale: writer 0 gps:" in run.console_log
    assert run.wall_seconds is not None
    assert run.wall_seconds > 0
    # The host's load was measured and judged against the setting (whether this host is
    # quiet is not the test's to know: other sessions may build on it meanwhile).
    assert run.host_busy_share is not None
    assert run.host_steal_share is not None
    assert run.host_load_avg is not None
    assert run.contended == (run.host_busy_share > settings.RCUBENCH_CONTENTION_SHARE)
    assert run.pinned is not None


def test_a_panicking_kernel_is_recorded_as_panic_with_its_console_and_no_data(comparison):
    run = _run(comparison, "sync-rcu-latency", "rdinit=/nonexistent init=/nonexistent")
    assert (run.result, run.error_code) == ("failed", "panic")
    assert run.error_message.startswith("Kernel panic - not syncing")
    assert "Kernel panic" in run.console_log
    assert not Measurement.objects.filter(run=run).exists()


def test_output_the_parser_rejects_is_parse_failed_not_data(comparison):
    # Every grace period expedited: rcuscale itself says there is nothing normal to measure.
    run = _run(comparison, "sync-rcu-latency", "rcupdate.rcu_expedited=1")
    assert (run.result, run.error_code) == ("failed", "parse-failed"), run.error_message
    assert "All grace periods expedited" in run.error_message
    assert not Measurement.objects.filter(run=run).exists()


def test_a_side_without_a_kernel_is_incomplete_infra_error(comparison):
    run = RunFactory.create(comparison=comparison, benchmark="boot-time", side="B")
    runs.execute_run(run.pk)
    run.refresh_from_db()
    assert (run.result, run.error_code) == ("incomplete", "infra-error")
    assert run.error_message == "side B has no kernel"


def test_nul_and_invalid_utf8_on_a_real_console_are_stored_not_lost(comparison):
    # busybox's printf as the guest's init writes a NUL and a byte that is not UTF-8 to the
    # console, then exits (a panic): psycopg refused the NUL, and the run ended "lost".
    # The panic drops what the tty has not sent yet: when printf was the init itself, and
    # even after stty's drain (TCSADRAIN) on a loaded host (a cold CI run, 2026-11-27).
    # A second of sleep (busybox's, by path: the guest's sh found no `sleep`, exit 127) lets
    # the UART send them before init exits.
    printf = r"printf 'RCUBENCH-HOSTILE\000\377\303(\n'"
    init = f'sh -c "{printf}; stty -F /dev/console sane; /bin/busybox sleep 1"'
    run = _run(comparison, "sync-rcu-latency", f"rdinit=/bin/busybox -- {init}")
    assert (run.result, run.error_code) == ("failed", "panic"), run.error_message
    assert "Attempted to kill init! exitcode=0x00000000" in run.error_message  # slept
    # Kernel messages (the panic) may come between the guest's bytes on the console.
    assert "RCUBENCH-HOSTILE\u2400" in run.console_log
    assert "\\xff\\xc3(" in run.console_log
    assert "Linux version" in run.console_log  # the whole console, not only the end


def test_a_sides_extras_reach_the_kernel_and_cannot_replace_the_benchmark(comparison):
    # A second rcubench.bench= used to win in the guest's init (it took the last one).
    run = _run(comparison, "boot-time", "rcupdate.rcu_expedited=1 rcubench.bench=smt-toggle")
    assert (run.result, run.error_code) == ("ok", ""), run.error_message
    assert "RCUBENCH-BEGIN v1 bench=boot-time" in run.console_log
    assert run.measurements.get(metric="rcu_expedited").samples == [1.0]
