"""The report's data: verdict order, the reproducer, and the raw-data exports."""

import csv
import io
import json
import math
import shlex

import pytest

from webapp.comparisons.management.commands.compare import Command as CompareCommand
from webapp.factories import (
    ComparisonFactory,
    MeasurementFactory,
    PatchSeriesFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
)
from webapp.reports import services
from webapp.reports.tests.conftest import (
    RUNS_PER_SIDE,
    VERDICTS_IN_REPORT_ORDER,
    WRITER_SAMPLES,
    writer_samples,
)

pytestmark = pytest.mark.django_db


def _parse_compare(line: str):
    """The reproducer's compare line, parsed by the real command's own argument parser."""
    argv = shlex.split(line)
    assert argv[:2] == ["./manage.py", "compare"]
    return CompareCommand().create_parser("manage.py", "compare").parse_args(argv[2:])


def test_verdict_rows_most_severe_first_then_primary(done_comparison):
    rows = services.verdict_rows(done_comparison)
    got = [(r.verdict.metric, r.verdict.statistic, r.verdict.is_primary, r.verdict.verdict)
           for r in rows]  # fmt: skip
    assert got == VERDICTS_IN_REPORT_ORDER


def test_verdict_row_text():
    c = ComparisonFactory.create(benchmarks=["bpf-slab"])
    from webapp.factories import MetricVerdictFactory

    v = MetricVerdictFactory.create(
        comparison=c, benchmark="bpf-slab", metric="slab_kb_peak_d0", statistic="value",
        median_a=123456.7, median_b=0.000123456, shift_pct=-3.14159, ci_low_pct=-5.0,
        ci_high_pct=-1.25, p_value=0.000123, p_adjusted=None,
        details={"relative": False, "shift": -480.5, "ci": [-700.0, -250.25],
                 "adjustment": "holm"},
    )  # fmt: skip
    (row,) = services.verdict_rows(c)
    assert row.verdict == v
    assert row.unit == "kB"  # from the benchmark spec when details lack it
    assert (row.median_a, row.median_b) == ("123457", "0.00012346")
    assert (row.shift, row.ci) == ("-3.14%", "[-5.00, -1.25]")
    assert row.absolute_shift == "-480.5 kB [-700, -250.25]"
    assert (row.p_value, row.p_adjusted, row.adjustment) == ("0.000123", "n/a", "holm")


def test_reproducer_for_two_refs(done_comparison):
    c = done_comparison
    c.cmdline_a = "rcupdate.rcu_normal=1 foo='a b'"
    c.alpha, c.threshold_pct, c.min_runs, c.max_runs = 0.01, 1.5, 30, 60
    c.save()
    text = services.reproducer(c)
    assert "\n" not in text
    opts = _parse_compare(text)
    assert opts.tree == c.revision_a.tree.name
    assert (opts.base, opts.head, opts.series) == ("v6.12", "rcu/next", None)
    assert opts.bench == ["sync-rcu-latency"]
    assert (opts.arch, opts.target) == ("x86_64", "qemu-x86_64")
    assert (opts.runs, opts.max_runs) == (30, 60)
    assert opts.cmdline_a == "rcupdate.rcu_normal=1 foo='a b'"
    assert opts.cmdline_b == "rcutree.jiffies_till_first_fqs=3 rcupdate.rcu_expedited=1"
    assert (opts.threshold, opts.alpha) == (1.5, 0.01)


def test_reproducer_names_every_benchmark_and_leaves_out_empty_cmdlines():
    c = ComparisonFactory.create(
        benchmarks=["boot-time", "bpf-slab"],
        target=TargetFactory.create(name="qemu-ppc64le", arch="ppc64le"),
    )
    argv = shlex.split(services.reproducer(c))
    assert "--cmdline-a" not in argv
    assert "--cmdline-b" not in argv
    opts = _parse_compare(services.reproducer(c))
    assert opts.bench == ["boot-time", "bpf-slab"]
    assert (opts.arch, opts.target) == ("ppc64le", "qemu-ppc64le")
    assert (opts.runs, opts.max_runs, opts.threshold, opts.alpha) == (24, 96, 2.0, 0.05)


def test_reproducer_for_a_series_downloads_its_mbox_first(settings):
    settings.RCUBENCH_PUBLIC_URL = "https://rcubench.example.org/"
    series = PatchSeriesFactory.create()
    a = RevisionFactory.create(ref="v6.12")
    c = ComparisonFactory.create(
        revision_a=a, revision_b=RevisionFactory.create(tree=a.tree, ref="v6.12", series=series)
    )
    curl, compare = services.reproducer(c).split("\n")
    url = f"https://rcubench.example.org/series/{series.pk}/mbox"
    assert shlex.split(curl) == ["curl", "-o", f"series-{series.pk}.mbox", url]
    opts = _parse_compare(compare)
    assert (opts.base, opts.head) == ("v6.12", "")
    assert str(opts.series) == f"series-{series.pk}.mbox"


def test_reproducer_uses_the_default_url_without_the_setting(settings):
    del settings.RCUBENCH_PUBLIC_URL
    series = PatchSeriesFactory.create()
    c = ComparisonFactory.create(revision_b=RevisionFactory.create(series=series))
    assert f"http://127.0.0.1:8000/series/{series.pk}/mbox" in services.reproducer(c)


def _csv_rows(c):
    return list(csv.reader(io.StringIO("".join(services.csv_chunks(c)))))


def test_csv_has_one_row_per_run_metric_and_sample(done_comparison):
    rows = _csv_rows(done_comparison)
    assert rows[0] == ["comparison_id", "benchmark", "metric", "unit", "side", "run_index",
                       "run_order", "run_result", "sample_index", "value"]  # fmt: skip
    # 2 sides x 3 runs, each with WRITER_SAMPLES writer durations and one gps value.
    assert len(rows) - 1 == 2 * RUNS_PER_SIDE * (WRITER_SAMPLES + 1)
    # Run order 1 is B's slot 0 (ABBA): its writer durations, in sample order.
    b0 = [r for r in rows[1:] if r[6] == "1" and r[2] == "writer_duration"]
    assert [r[:9] for r in b0[:2]] == [
        [str(done_comparison.pk), "sync-rcu-latency", "writer_duration", "ms", "B", "0", "1",
         "ok", str(i)] for i in range(2)
    ]  # fmt: skip
    assert [float(r[9]) for r in b0] == writer_samples("B", 0)  # exact round trip
    orders = [int(r[6]) for r in rows[1:]]
    assert orders == sorted(orders)


def test_csv_includes_runs_that_are_not_data_with_their_result():
    run = RunFactory.create(state="done", result="failed", error_code="parse-failed")
    MeasurementFactory.create(run=run, samples=[1.5])
    rows = _csv_rows(run.comparison)
    assert len(rows) == 2
    assert rows[1][7] == "failed"


def _json(c):
    return json.loads("".join(services.json_chunks(c)))


def test_json_holds_header_verdicts_and_every_sample(done_comparison):
    c = done_comparison
    data = _json(c)
    head = data["comparison"]
    assert head["id"] == c.pk
    assert (head["state"], head["result"], head["verdict"]) == ("done", "ok", "regression")
    a, b = head["kernels"]
    assert (a["side"], a["ref"], a["tree"], a["sha"]) == ("A", "v6.12", c.revision_a.tree.name,
                                                          c.revision_a.sha)  # fmt: skip
    assert (b["ref"], b["build"]["result"], b["series"]) == ("rcu/next", "ok", None)
    assert head["target"]["name"] == "qemu-x86_64"
    runs_a, runs_b = head["runs"]
    assert (runs_a["ok"], runs_a["failed"]) == (RUNS_PER_SIDE, 0)
    assert (runs_b["ok"], runs_b["failed"], runs_b["errors"]) == (RUNS_PER_SIDE, 1, {"panic": 1})
    assert head["created_at"] == c.created_at.isoformat()
    assert data["report_url"].endswith(f"/comparisons/{c.pk}/")
    assert data["reproducer"] == services.reproducer(c)

    verdicts = data["verdicts"]
    assert [(v["metric"], v["statistic"], v["is_primary"], v["verdict"]) for v in verdicts] == (
        VERDICTS_IN_REPORT_ORDER
    )
    assert verdicts[0]["unit"] == "ms"
    assert (verdicts[0]["shift_pct"], verdicts[0]["p_adjusted"]) == (9.9, 0.0036)

    samples = data["samples"]
    assert samples["columns"] == list(services.SAMPLE_COLUMNS)
    assert len(samples["rows"]) == 2 * RUNS_PER_SIDE * (WRITER_SAMPLES + 1)
    col = {name: i for i, name in enumerate(samples["columns"])}
    b0 = [r for r in samples["rows"] if r[col["run_order"]] == 1 and r[col["metric"]] ==
          "writer_duration"]  # fmt: skip
    assert [r[col["value"]] for r in b0] == writer_samples("B", 0)
    assert {r[col["side"]] for r in b0} == {"B"}


def test_json_writes_non_finite_numbers_as_null():
    run = RunFactory.create(state="done", result="ok")
    MeasurementFactory.create(run=run, samples=[1.0, math.nan, math.inf])
    from webapp.factories import MetricVerdictFactory

    MetricVerdictFactory.create(comparison=run.comparison, p_adjusted=math.nan)
    data = _json(run.comparison)
    assert [r[-1] for r in data["samples"]["rows"]] == [1.0, None, None]
    assert data["verdicts"][0]["p_adjusted"] is None


def test_json_of_a_comparison_without_samples_is_valid(running_comparison):
    assert _json(running_comparison)["samples"]["rows"] == []


def test_figures_are_built_from_ok_runs_only(done_comparison):
    # The panicked run's measurement must not show up in the figures.
    panicked = done_comparison.runs.get(result="failed")
    MeasurementFactory.create(run=panicked, samples=[12345.678])
    (section,) = services.figure_sections(done_comparison)
    assert section.benchmark == "sync-rcu-latency"
    assert [m.metric for m in section.metrics] == ["writer_duration", "gps"]  # primary first
    wd = section.metrics[0]
    assert wd.is_primary
    assert len(wd.figures) == 3  # ECDF, runs, histogram
    assert len(section.metrics[1].figures) == 2  # a single value: no histogram
    assert "12345.678" not in wd.figures[0] + wd.figures[1] + wd.figures[2]
    assert "6.845" in wd.figures[1]  # B's last run: median of writer_samples("B", 2)
    assert section.overview == []


def test_slab_comparison_gets_the_delay_sweep(slab_comparison):
    (section,) = services.figure_sections(slab_comparison)
    assert len(section.overview) == 1
    assert "delay between map-in-map updates" in section.overview[0]
    assert section.metrics[0].metric == "slab_kb_peak_d0"  # the primary metric


def test_reproducer_says_what_the_command_cannot_redo():
    series_a, series_b = PatchSeriesFactory.create(), PatchSeriesFactory.create()
    a = RevisionFactory.create(ref="v6.12", series=series_a)
    b = RevisionFactory.create(tree=a.tree, ref="rcu/dev", series=series_b)
    lines = services.reproducer(ComparisonFactory.create(revision_a=a, revision_b=b)).split("\n")
    assert lines[0].startswith("curl ")
    assert lines[1:3] == [
        f"# note: side A had series {series_a.pk} applied, which this cannot redo",
        "# note: side B applied the series on rcu/dev, this applies it on v6.12",
    ]
    assert _parse_compare(lines[3]).series.name == f"series-{series_b.pk}.mbox"
