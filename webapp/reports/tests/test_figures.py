"""The figure builders on data small enough to check by hand (no database)."""

import re

import numpy as np
import pytest

from benchmarks.registry import BENCHMARKS
from benchmarks.spec import FigureLine, FigureSpec
from webapp.reports import figures
from webapp.reports.figures import RunValues


def _trace(fig, name_prefix):
    matches = [t for t in fig.data if t.name and t.name.startswith(name_prefix)]
    assert len(matches) == 1, [t.name for t in fig.data]
    return matches[0]


def test_ecdf_points_are_the_steps_of_the_empirical_cdf():
    xs, ys = figures.ecdf_points([3.0, 1.0, 2.0])
    assert xs == [1.0, 1.0, 2.0, 3.0]
    assert ys == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])


def test_ecdf_points_with_ties_rise_at_the_tied_value():
    xs, ys = figures.ecdf_points([1.0, 2.0, 1.0])
    assert xs == [1.0, 1.0, 1.0, 2.0]
    assert ys == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])


def test_ecdf_points_of_nothing():
    assert figures.ecdf_points([]) == ([], [])


def test_many_samples_are_drawn_through_exact_ecdf_corners():
    values = np.random.default_rng(1).permutation(10_000).astype(float)  # 0..9999
    xs, ys = figures.ecdf_points(values.tolist(), max_points=100)
    assert len(xs) <= 102
    assert (xs[0], ys[0]) == (0.0, 0.0)
    assert (xs[1], xs[-1], ys[-1]) == (0.0, 9999.0, 1.0)
    # On 0..n-1 the ECDF at x is (x + 1) / n: every point drawn lies on it.
    for x, y in zip(xs[1:], ys[1:], strict=True):
        assert y == pytest.approx((x + 1) / 10_000)
    assert ys == sorted(ys)


def test_ecdf_figure_has_one_step_line_per_side():
    fig = figures.ecdf_figure(
        "t", "ms", {"A": [3.0, 1.0, 2.0], "B": [5.0, 4.0]}, runs={"A": 2, "B": 1}
    )
    a, b = _trace(fig, "A:"), _trace(fig, "B:")
    assert a.name == "A: 3 samples, 2 runs"
    assert b.name == "B: 2 samples, 1 runs"
    assert list(a.x) == [1.0, 1.0, 2.0, 3.0]
    assert list(b.y) == pytest.approx([0.0, 0.5, 1.0])
    assert a.line.shape == b.line.shape == "hv"
    assert a.line.color != b.line.color
    assert fig.layout.xaxis.type != "log"
    assert figures.ecdf_figure("t", "ms", {"A": [1.0]}, log_x=True).layout.xaxis.type == "log"


def test_latency_ecdf_has_a_log_axis_and_shows_the_body_up_to_p99_5():
    # 999 samples from 1 to ~10 ms and one of 1000 ms: on a linear axis up to the max the
    # body would fill the first 1% of the width.
    a = [1.0 + 9.0 * k / 998 for k in range(999)] + [1000.0]
    b = [2.0 * x for x in a[:-1]]
    fig = figures.ecdf_figure("t", "ms", {"A": a, "B": b}, log_x=True,
                              view_quantile=figures.ECDF_VIEW_QUANTILE)  # fmt: skip
    xaxis = fig.layout.xaxis
    assert xaxis.type == "log"
    lo, hi = np.log10(1.0), np.log10(np.quantile(a + b, 0.995))  # plotly: log10 units
    pad = 0.02 * (hi - lo)
    assert list(xaxis.range) == pytest.approx([lo - pad, hi + pad])
    assert 10 ** xaxis.range[1] < 25.0  # the max (1000 ms) is out of the first view
    assert xaxis.title.text == "ms (log scale, shown to p99.5, zoom out for the tail)"
    # every corner is still drawn, the max among them
    assert max(_trace(fig, "A").x) == 1000.0


def test_ecdf_view_without_a_tail_to_cut_or_on_a_linear_axis():
    assert figures.ecdf_view({"A": [1.0, 1.0, 1.0]}, 0.995, log=True) is None  # all equal
    assert figures.ecdf_view({}, 0.995, log=False) is None
    view = figures.ecdf_view({"A": [0.0, 10.0], "B": [20.0]}, 0.5, log=False)
    assert view == pytest.approx((-0.2, 10.2))


def test_ecdf_of_non_positive_samples_stays_linear():
    fig = figures.ecdf_figure("t", "us", {"A": [0.0, 1.0, 2.0], "B": [1.0, 3.0]}, log_x=True,
                              view_quantile=0.5)  # fmt: skip
    assert fig.layout.xaxis.type != "log"
    assert list(fig.layout.xaxis.range) == pytest.approx([-0.02, 1.02])
    assert not figures.all_positive({"A": [0.0, 1.0]})
    assert not figures.all_positive({})
    assert figures.all_positive({"A": [0.5], "B": []})


RUNS = [
    RunValues("A", 3, 1, [4.0]),
    RunValues("B", 1, 0, [7.0, 5.0, 6.0]),
    RunValues("A", 0, 0, [1.0, 2.0, 9.0]),  # median 2, mean 4, p90 7.6
    RunValues("B", 2, 1, [8.0]),
]


def test_run_level_figure_puts_run_order_on_x_and_per_run_medians_on_y():
    fig = figures.run_level_figure("t", "ms", RUNS, "p50")
    a, b = _trace(fig, "A:"), _trace(fig, "B:")
    assert (list(a.x), list(a.y)) == ([0, 3], [2.0, 4.0])
    assert (list(b.x), list(b.y)) == ([1, 2], [6.0, 8.0])
    assert list(a.customdata) == [0, 1]  # run slots, for the hover text
    assert a.mode == "markers"
    assert "run order" in fig.layout.xaxis.title.text
    assert fig.layout.yaxis.title.text == "per-run median (ms)"
    # A dotted line at each side's median over runs.
    assert sorted(s.y0 for s in fig.layout.shapes) == [3.0, 7.0]


def test_run_level_figure_draws_each_sides_ecdf_of_the_run_values_beside_them():
    # Per-run p90 as the engine computes it (numpy's linear quantile): A's runs 7.6 and 4.
    fig = figures.run_level_figure("t", "ms", RUNS, "p90")
    a, ecdf_a = _trace(fig, "A:"), _trace(fig, "ECDF A")
    assert list(a.y) == [pytest.approx(7.6), 4.0]
    assert (list(ecdf_a.x), list(ecdf_a.y)) == ([4.0, 4.0, pytest.approx(7.6)], [0, 0.5, 1.0])
    assert ecdf_a.line.shape == "hv"
    assert (a.xaxis, ecdf_a.xaxis) == ("x", "x2")  # side by side
    assert fig.layout.xaxis2.title.text == "per-run p90 (ms)"
    ecdf_b = _trace(fig, "ECDF B")
    assert list(ecdf_b.x) == [pytest.approx(6.8), pytest.approx(6.8), 8.0]


def test_run_level_figure_of_single_values_says_value():
    fig = figures.run_level_figure("t", "kB", [RunValues("A", 0, 0, [5.0])], "value")
    assert fig.layout.yaxis.title.text == "per-run value (kB)"


def test_log_histogram_bins_both_sides_on_shared_log_spaced_edges():
    fig = figures.log_histogram("sync", "ms", {"A": [1.0, 5.0, 50.0, 1000.0],
                                               "B": [3.0, 300.0]}, bins=3)  # fmt: skip
    assert fig.layout.xaxis.type == "log"
    a, b = _trace(fig, "A:"), _trace(fig, "B:")
    assert list(a.x) == pytest.approx([1.0, 10.0, 100.0, 1000.0])
    assert list(b.x) == list(a.x)
    # Fractions of each side's samples per bin; the last repeats to close the step line.
    assert list(a.y) == pytest.approx([0.5, 0.25, 0.25, 0.25])
    assert list(b.y) == pytest.approx([0.5, 0.0, 0.5, 0.5])
    assert a.line.shape == "hv"
    assert "not shown" not in fig.layout.title.text


def test_log_histogram_leaves_out_and_counts_non_positive_samples():
    fig = figures.log_histogram("sync", "ms", {"A": [0.0, 2.0, 4.0], "B": [-1.0, 3.0]})
    assert "(2 samples <= 0 not shown)" in fig.layout.title.text
    assert sum(_trace(fig, "A:").y[:-1]) == pytest.approx(1.0)
    assert _trace(fig, "A:").name == "A: 2 samples"


def test_log_histogram_of_equal_samples_has_one_bin_around_them():
    fig = figures.log_histogram("sync", "ms", {"A": [2.0, 2.0]}, bins=1)
    a = _trace(fig, "A:")
    assert a.x[0] < 2.0 < a.x[1]
    assert list(a.y) == [1.0, 1.0]


SWEEP = FigureSpec(
    title="slab against the delay",
    x=(0, 1, 2, 5, 10),
    x_label="delay (ms)",
    y_label="slab (kB)",
    lines=(FigureLine("peak", "slab_kb_peak_d{x}"),
           FigureLine("mean", "slab_kb_mean_d{x}", dash="dash")),
    x_name="delay",
    x_unit="ms",
)  # fmt: skip


def test_sweep_draws_median_and_iqr_against_x():
    per_run = {
        "A": {f"slab_kb_peak_d{d}": [100.0 + d, 200.0 + d, 300.0 + d, 400.0 + d] for d in SWEEP.x}
        | {"slab_kb_mean_d0": [10.0, 20.0, 30.0]},
        "B": {"slab_kb_peak_d0": [500.0], "slab_kb_peak_d5": [600.0]},  # delays 1, 2, 10 missing
    }
    fig = figures.sweep_figure(SWEEP, per_run, unit="kB")
    peak_a = _trace(fig, "A peak (median")
    assert list(peak_a.x) == [0, 1, 2, 5, 10]
    assert list(peak_a.y) == [250.0, 251.0, 252.0, 255.0, 260.0]
    assert peak_a.line.dash == "solid"
    band = _trace(fig, "A peak IQR")
    assert list(band.x) == [0, 1, 2, 5, 10, 10, 5, 2, 1, 0]
    assert list(band.y) == [325.0, 326.0, 327.0, 330.0, 335.0, 185.0, 180.0, 177.0, 176.0, 175.0]
    assert band.fill == "toself"
    mean_a = _trace(fig, "A mean (median")
    assert (list(mean_a.x), list(mean_a.y)) == ([0], [20.0])
    assert mean_a.line.dash == "dash"
    peak_b = _trace(fig, "B peak (median")
    assert (list(peak_b.x), list(peak_b.y)) == ([0, 5], [500.0, 600.0])
    assert not [t for t in fig.data if t.name.startswith("B mean")]
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 5, 10]
    assert fig.layout.title.text == "slab against the delay"
    assert fig.layout.xaxis.title.text == "delay (ms)"
    assert fig.layout.yaxis.title.text == "slab (kB)"
    assert peak_a.hovertemplate.startswith("delay %{x} ms: median %{y:.6g} kB<br>IQR")


def test_sweep_hover_without_units():
    bare = FigureSpec("t", (1, 2), "n", "y", (FigureLine("v", "v{x}"),))
    line = _trace(figures.sweep_figure(bare, {"A": {"v1": [1.0]}}), "A v (median")
    assert line.hovertemplate.startswith("x %{x}: median %{y:.6g}<br>")


def test_bpf_slab_declares_the_sweep_the_report_always_drew():
    (sweep,) = BENCHMARKS["bpf-slab"].spec.figures
    fig = figures.sweep_figure(sweep, {"A": {f"slab_kb_{s}_d{d}": [1.0] for d in sweep.x
                                             for s in ("peak", "mean")}}, unit="kB")  # fmt: skip
    assert fig.layout.title.text == "bpf-slab: sock_inode_cache slab against the map-update delay"
    assert fig.layout.xaxis.title.text == "delay between map-in-map updates (ms)"
    assert fig.layout.yaxis.title.text == "sock_inode_cache slab (kB)"
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 5, 10]
    peak, mean = _trace(fig, "A peak (median"), _trace(fig, "A mean (median")
    assert (peak.line.dash, mean.line.dash) == ("solid", "dash")
    assert list(peak.x) == list(mean.x) == [0, 1, 2, 5, 10]
    assert peak.hovertemplate == ("delay %{x} ms: median %{y:.6g} kB<br>IQR "
                                  "[%{customdata[0]:.6g}, %{customdata[1]:.6g}]"
                                  "<extra>A peak</extra>")  # fmt: skip


def test_figures_module_does_not_import_django():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(figures))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}  # fmt: skip
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m.startswith(("django", "webapp"))}


def test_log_axes_label_every_tick_with_its_full_value():
    """Plotly's default on a log axis over one to a few decades is "9 10 2 3" (the 2 meaning
    20); a tick format makes every label the value. The browser test reads them as drawn."""
    samples = {"A": [3.0, 6.0, 12.0, 25.0, 60.0], "B": [4.0, 9.0, 30.0]}
    hist = figures.log_histogram("sync", "ms", samples)
    ecdf = figures.ecdf_figure("sync", "ms", samples, log_x=True, view_quantile=0.995)
    for fig in (hist, ecdf):
        xaxis = fig.to_dict()["layout"]["xaxis"]
        assert (xaxis["type"], xaxis["tickformat"]) == ("log", "~g")
    linear = figures.ecdf_figure("sync", "ms", {"A": [0.0, 1.0]}, log_x=True)
    assert "tickformat" not in linear.to_dict()["layout"]["xaxis"]


def test_the_report_draws_every_run_level_statistic_in_run_order_and_as_an_ecdf():
    # The figures of one latency metric as the report page gets them (HTML, no database):
    # the pooled ECDF, then per-run p50, mean and p90 each in run order beside its ECDF,
    # then the histogram; a single-value metric gets its value's.
    # Function-local imports: sections reads the database, the rest of this module not.
    from webapp.comparisons.models import Comparison
    from webapp.reports import sections

    runs = [RunValues(side, 2 * i + (side == "B"), i, [base + 0.01 * k + 0.1 * i
                                                      for k in range(10)])
            for side, base in (("A", 6.0), ("B", 6.6)) for i in range(3)]  # fmt: skip
    spec = BENCHMARKS["sync-rcu-latency"].spec
    # An unsaved comparison has no builds: no HZ, so no jiffy histogram here (its own tests
    # are in test_jiffy_figures.py).
    nobuilds = Comparison()
    got = sections._metric_figures("sync-rcu-latency", "writer_duration",
                                   sections._MetricData("ms", runs), spec, nobuilds)  # fmt: skip
    assert len(got.figures) == 5
    titles = ["per-run median", "per-run mean", "per-run p90"]
    for html, title in zip(got.figures[1:4], titles, strict=True):
        assert f"writer_duration: {title}, in run order and as an ECDF" in html
        assert re.search(r'"name":\s*"ECDF A"', html)
        assert re.search(r'"name":\s*"ECDF B"', html)
    # B's last run: p90 of 6.8 .. 6.89 (numpy's linear quantile) is 6.881.
    assert "6.881" in got.figures[3]
    assert "6.881" not in got.figures[1]
    single = sections._metric_figures("sync-rcu-latency", "gps",
                                      sections._MetricData("", [RunValues("A", 0, 0, [9.0])]),
                                      spec, nobuilds)  # fmt: skip
    assert len(single.figures) == 2
    assert "gps: per-run value" in single.figures[1]
