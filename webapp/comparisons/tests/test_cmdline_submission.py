"""The one submission service: kernel command-line extras off the allow-list or overriding
a benchmark's own parameter are refused naming the parameter, every refusal names its field
(and the CLI its option), and nothing is stored."""

import dataclasses
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.factories import MetricVerdictFactory, TreeFactory
from webapp.comparisons import terminal
from webapp.comparisons.management.commands.compare import Command, _Lines
from webapp.comparisons.models import Comparison
from webapp.comparisons.progress import Progress
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.comparisons.summary import verdict_rows
from webapp.trees.models import Revision

pytestmark = pytest.mark.django_db


def _request(benchmarks: tuple[str, ...] = ("sync-rcu-latency",), **kw: str) -> ComparisonRequest:
    return ComparisonRequest(
        tree=TreeFactory.create().name, base_ref="v6.12", benchmarks=benchmarks,
        target="qemu-x86_64", min_runs=24, max_runs=96, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("side", "extra", "message"),
    [
        # Turned every run into a 20-minute timeout (rcuscale never powered off).
        ("b", "rcuscale.shutdown=0", "side B command line: rcuscale.shutdown is set by the "
                                     "benchmark sync-rcu-latency itself"),
        # Won in the guest's init (the last rcubench.bench= was taken).
        ("a", "rcutree.jiffies_till_first_fqs=3 rcubench.bench=bpf-slab",
         "side A command line: rcubench.bench is the guest's own parameter"),
        ("b", "init=/bin/sh", "side B command line: init is set by the runner"),
        ("b", "rcupdate.rcu_cpu_stall_suppress=1", "rcupdate.rcu_cpu_stall_suppress would "
                                                   "silence or postpone stall warnings"),
        ("a", "nosmt", "side A command line: nosmt is not on the allow-list"),
        ("b", "rcutree.x=`reboot`", r"side B command line: 'rcutree.x=`reboot`' is not name"),
    ],
)  # fmt: skip
def test_refused_extras_name_the_parameter_and_nothing_is_stored(side, extra, message):
    with pytest.raises(SubmissionError, match=message):
        submit_comparison(_request(**{f"cmdline_{side}": extra}))
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()


def test_a_parameter_of_any_requested_benchmark_is_refused():
    with pytest.raises(SubmissionError, match="slab_nomerge is set by the benchmark bpf-slab"):
        submit_comparison(_request(("sync-rcu-latency", "bpf-slab"), cmdline_b="slab_nomerge"))
    assert not Comparison.objects.exists()


def test_a_free_rcuscale_value_is_refused_pointing_at_the_presets():
    with pytest.raises(SubmissionError) as refused:
        submit_comparison(_request(cmdline_b="rcuscale.nwriters=200"))
    assert refused.value.field == "cmdline_b"
    assert refused.value.message.startswith(
        "side B command line: rcuscale.nwriters is set by the benchmark sync-rcu-latency "
        "itself; ask for a preset instead, a reviewed variant chosen as a benchmark: "
        "sync-rcu-latency--many-writers (rcuscale.nwriters=16), "
        "sync-rcu-latency--writer-holdoff (rcuscale.writer_holdoff=1000), "
    )
    assert not Comparison.objects.exists()


def test_a_preset_is_a_benchmark_of_its_own_stored_by_its_name():
    c = submit_comparison(_request(("sync-rcu-latency", "sync-rcu-latency--writer-holdoff")))
    assert c.benchmarks == ["sync-rcu-latency", "sync-rcu-latency--writer-holdoff"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("sync-rcu-latency--nwriters-200", "benchmark sync-rcu-latency has no preset "
                                           "'nwriters-200'; its presets: sync-rcu-latency--"),
        ("boot-time--many-writers", "benchmark boot-time has no preset 'many-writers'; its "
                                    "presets: none"),
        ("sync-rcu-latency--" + "x" * 5000, "has no preset 'x{40}';"),
    ],
)  # fmt: skip
def test_an_unknown_preset_is_refused_on_benchmarks_naming_the_valid_ones(name, message):
    with pytest.raises(SubmissionError, match=message) as refused:
        submit_comparison(_request(("sync-rcu-latency", name)))
    assert refused.value.field == "benchmarks"
    assert len(refused.value.message) < 1000
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()


def test_the_cli_takes_a_preset_by_bench_and_names_the_option_refusing_one():
    TreeFactory.create(name="rcu")
    with pytest.raises(CommandError, match=r"^--bench: benchmark sync-rcu-latency has no "
                                           r"preset 'lots'; its presets: "):  # fmt: skip
        call_command("compare", "--no-wait", "--tree", "rcu", "--base", "v6.12",
                     "--bench", "sync-rcu-latency--lots")  # fmt: skip
    assert not Comparison.objects.exists()
    call_command("compare", "--no-wait", "--tree", "rcu", "--base", "v6.12",
                 "--bench", "sync-rcu-latency-exp--many-writers", stdout=io.StringIO())  # fmt: skip
    assert Comparison.objects.get().benchmarks == ["sync-rcu-latency-exp--many-writers"]


def test_rcu_tunables_are_accepted_and_stored_as_given():
    extra = "rcutree.jiffies_till_first_fqs=3 rcu_nocbs=1 nohz_full=1"
    c = submit_comparison(_request(("sync-rcu-latency", "boot-time"), cmdline_b=extra))
    assert (c.cmdline_a, c.cmdline_b) == ("", extra)


# --- errors name the field, and the CLI's option --------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"target": "qemu-riscv"}, "target", "no target named 'qemu-riscv'"),
        ({"arch": "ppc64le"}, "arch", "target qemu-x86_64 is x86_64, not ppc64le"),
        ({"tree": "nope"}, "tree", "no tree named 'nope'; trees: "),
        ({"min_runs": 4}, "min_runs", "at least 24 runs per side are needed, got 4"),
        ({"seed": -1}, "seed", r"the seed must be in \[0, 2\*\*62\), got -1"),
        ({"series_mbox": b"not a patch\n"}, "series", "bad patch series"),
    ],
)
def test_a_refusal_names_the_request_field_for_a_form_or_an_api(change, field, message):
    with pytest.raises(SubmissionError, match=message) as refused:
        submit_comparison(dataclasses.replace(_request(), **change))
    assert refused.value.field == field
    assert refused.value.as_dict() == {field: [refused.value.message]}
    assert not Comparison.objects.exists()


def test_the_cli_names_the_option_a_refusal_is_about():
    TreeFactory.create(name="rcu")
    with pytest.raises(CommandError, match=r"^--runs: at least 24 runs per side are needed, got 4"):
        call_command("compare", "--no-wait", "--tree", "rcu", "--base", "v6.12", "--runs", "4")
    with pytest.raises(CommandError, match=r"^--arch: target qemu-x86_64 is x86_64, not ppc64le$"):
        call_command("compare", "--no-wait", "--tree", "rcu", "--base", "v6.12",
                     "--target", "qemu-x86_64", "--arch", "ppc64le")  # fmt: skip


def test_a_given_seed_is_stored():
    assert submit_comparison(dataclasses.replace(_request(), seed=12345)).seed == 12345


def test_off_a_terminal_progress_is_one_line_per_change():
    out = io.StringIO()
    show = _Lines(out)
    building = Progress("building", 0, 4, 0, "A: running")
    running = Progress("running look 1", 1, 4, 0, "1 running")
    for p in (building, building, building, running, running):
        show(p)
    assert out.getvalue().splitlines() == [
        "building: 0/4 runs (A: running)",
        "running look 1: 1/4 runs (1 running)",
    ]


def _verdicts():
    sign = {"k": 20, "n": 24, "below": 4, "ties": 0, "median_a": 6.0, "p": 0.0015438795,
            "above_is": "worse"}  # fmt: skip
    primary = MetricVerdictFactory.create(
        p_value=0.0004, p_median=0.0253, verdict="regression",
        details={"unit": "ms", "adjustment": "holm", "sign_test": sign,
                 "p_method": "permutation", "p_permutations": 9999},
    )  # fmt: skip
    MetricVerdictFactory.create(
        comparison=primary.comparison, metric="gps", statistic="value", is_primary=False,
        warnings=["ties: 100% of run values are tied (midranks used)"],
        details={"unit": "count", "sign_test": sign, "p_method": "exact"},
    )  # fmt: skip
    return primary.comparison


def test_the_summary_has_the_cross_checks_and_warnings_under_their_row(monkeypatch):
    c = _verdicts()
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    Command(stdout=out)._summary(c)
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    head, numbers, first, first_numbers, checks, checks_end, second, _, warning, *rest = lines
    assert head.split() == ["metric", "stat", "verdict"]
    assert numbers.split() == ["A", "median", "B", "median", "shift", "[95%", "CI]", "p", "p",
                               "adj"]  # fmt: skip
    assert first.startswith("sync-rcu-latency/writer_duration * p50 ")
    assert first.endswith("  regression")
    assert "0.0004 P" in first_numbers
    assert checks == ("    cross-checks: 20/24 B runs above A's median, p=0.00154 (above is "
                      "worse);")  # fmt: skip
    assert checks_end == "      Mood p=0.0253"
    assert second.startswith("sync-rcu-latency/gps value")  # a secondary metric: no cross-checks
    assert warning == "    warning: ties: 100% of run values are tied (midranks used)"
    assert rest[0] == "sync-rcu-latency guards: calls +0.00% [-1.00, +1.00]"  # its gps row
    assert rest[1].startswith("p: P permutation p from 9,999 random relabellings")
    assert "E exact: every relabelling" in " ".join(" ".join(rest).split())


def test_a_wide_terminal_gets_one_line_per_row():
    c = _verdicts()
    rows = verdict_rows(c)
    lines = terminal.verdict_table(rows, "regression", "http://x/comparisons/1/", 200, ("a", "b"))
    head, first, checks, second, warning, *_ = lines
    assert head.split()[:2] == ["metric", "stat"]
    assert head.endswith("p adj  verdict")
    assert first.startswith("sync-rcu-latency/writer_duration *  p50 ")
    assert first.endswith("  regression")
    assert checks.startswith("    cross-checks: 20/24 B runs above")
    assert second.startswith("sync-rcu-latency/gps ")
    assert warning.startswith("    warning: ties")
    assert lines[-1] == "verdict: regression   report: http://x/comparisons/1/"
    # Narrower than a row on two lines: wrapped, never longer than the width; a URL whole.
    narrow = terminal.verdict_table(rows, "regression", "http://x/" + "y" * 60, 40, ("a", "b"))
    assert all(len(ln) <= 40 for ln in narrow[:-1])
    assert narrow[-1] == "report: http://x/" + "y" * 60
