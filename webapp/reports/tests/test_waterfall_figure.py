"""The attribution waterfall (figures.waterfall_figure) on bars small enough to check by
hand: pure, no database."""

import pytest

from stats.bisection import Effect, waterfall
from webapp.reports import figures

LABELS = ["patch 1/4", "patch 2/4", "patch 3/4", "patch 4/4"]
SUBJECTS = ["rcu: a", "rcu: b", "rcu: c", "rcu: d"]
# Patch 2 moved it (CI beyond 1%), patch 3 did not build, patch 4 gave some back (its CI
# beyond -1%), patch 1 is noise.
EFFECTS = [Effect(0.5, -0.5, 1.5), Effect(9.0, 7.0, 11.0), None, Effect(-3.0, -4.5, -1.5)]


def _figure(**kw):
    bars = waterfall(EFFECTS, 1.0)
    return figures.waterfall_figure("writer_duration (p50)", "%", LABELS, SUBJECTS, bars, **kw)


def _trace(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def test_each_patch_is_a_bar_from_where_the_ones_before_it_ended():
    fig = _figure(threshold=1.0, original=Effect(7.0, 5.0, 9.0))
    bars = _trace(fig, "each patch against its parent")
    assert list(bars.x) == LABELS
    assert list(bars.y) == [0.5, 9.0, 0.0, -3.0]  # the one not measured: an empty slot
    assert list(bars.base) == [0.0, 0.5, 9.5, 9.5]
    grey, up, down = figures.QUIET_BAR, figures.COLORS["B"], figures.COLORS["A"]
    assert list(bars.marker.color) == [grey, up, grey, down]
    assert "rcu: b<br>+9 % [+7, +11]" in bars.customdata[1]
    assert "not measured" in bars.customdata[2]
    assert [a.text for a in fig.layout.annotations] == ["not measured"]
    assert fig.layout.annotations[0].x == "patch 3/4"


def test_the_error_bars_are_each_patchs_ci_at_its_bars_end():
    ci = _trace(_figure(), "95% CI of each patch")
    assert list(ci.x) == ["patch 1/4", "patch 2/4", "patch 4/4"]
    assert list(ci.y) == pytest.approx([0.5, 9.5, 6.5])
    assert list(ci.error_y.array) == pytest.approx([1.0, 2.0, 1.5])
    assert list(ci.error_y.arrayminus) == pytest.approx([1.0, 2.0, 1.5])
    assert ci.error_y.symmetric is False


def test_the_sum_stands_beside_the_original_effect_and_the_threshold_band():
    fig = _figure(threshold=1.0, original=Effect(7.0, 5.0, 9.0))
    total = _trace(fig, "sum of the patches")
    assert (list(total.x), list(total.y)) == (["sum"], [pytest.approx(6.5)])
    original = _trace(fig, "the original comparison")
    assert (list(original.x), list(original.y)) == (["original"], [7.0])
    assert list(original.error_y.array) == [2.0]
    assert list(original.error_y.arrayminus) == [2.0]
    (band,) = fig.layout.shapes
    assert (band.y0, band.y1) == (-1.0, 1.0)
    assert fig.layout.yaxis.title.text == "effect (%)"


def test_without_a_threshold_or_an_original_there_is_neither():
    fig = _figure()
    assert not fig.layout.shapes
    assert [t.name for t in fig.data] == [
        "each patch against its parent", "95% CI of each patch", "sum of the patches"
    ]  # fmt: skip


def test_an_original_without_a_ci_has_no_error_bar():
    fig = _figure(original=Effect(7.0, None, None))
    original = _trace(fig, "the original comparison")
    assert list(original.error_y.array) == [0.0]
