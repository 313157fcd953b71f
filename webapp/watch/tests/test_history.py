"""The history service, page and API of a watched tree, on real-shaped rows: pushes whose
comparisons have B runs with writer_duration samples and stored primary verdicts."""

import pytest

from tests.support.factories import (
    HISTORY_RUNS,
    MembershipFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
    head_sha,
    watched_head,
)
from webapp.watch import figures, history
from webapp.watch.history import median_ci
from webapp.watch.models import ChangePoint

RUNS = HISTORY_RUNS
_sha = head_sha
add_head = watched_head


@pytest.fixture
def target(db):
    return TargetFactory.create(name="qemu-x86_64")


@pytest.fixture
def stepped(db, target):
    """16 tested heads: 8 at 6.0 ms, 8 at 6.6 ms (+10%); plus pushes that are no history:
    an anchor, a superseded one, a running comparison."""
    tree = TreeFactory.create(name="rcu")
    heads = [add_head(tree, target, n, 6.0 if n < 8 else 6.6,
                      verdict="regression" if n == 8 else "no-meaningful-change")
             for n in range(16)]  # fmt: skip
    add_head(tree, target, 100, 9.0, anchor=True)
    add_head(tree, target, 101, 9.0, state="superseded")
    add_head(tree, target, 102, 9.0, done=False)
    return tree, heads


def test_median_ci_order_statistics():
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # [min, max] covers 93.75% only
    ci = median_ci([float(v) for v in range(1, 7)])
    assert ci is not None
    assert (ci.low, ci.high) == (1.0, 6.0)
    assert ci.coverage == pytest.approx(1 - 2 / 64)
    ci = median_ci([float(v) for v in range(1, 25)])  # n = 24: x_(7), x_(18) (1-based)
    assert ci is not None
    assert (ci.low, ci.high) == (7.0, 18.0)
    assert ci.coverage >= 0.95


def test_history_points_in_push_order(stepped):
    tree, heads = stepped
    [s] = history.tree_history(tree, UserFactory.create()).series
    assert (s.branch, s.target, s.benchmark, s.metric, s.unit) == (
        "rcu/dev",
        "qemu-x86_64",
        "sync-rcu-latency",
        "writer_duration",
        "ms",
    )
    assert [p.push_id for p in s.points] == [push.pk for push, _ in heads]
    assert [p.comparison_id for p in s.points] == [c.pk for _, c in heads]
    first, ninth = s.points[0], s.points[8]
    # B's per-run values are the runs' medians 6.0 + 0.01 i: their median is 6.035
    assert first.median == pytest.approx(6.035)
    assert first.ci_low is not None
    assert first.ci_high is not None
    assert first.ci_low <= first.median <= first.ci_high
    assert (first.ci_low, first.ci_high) == (pytest.approx(6.0), pytest.approx(6.07))
    assert first.n_runs == RUNS
    assert first.sha == _sha(1000)
    assert ninth.median == pytest.approx(6.635)
    assert ninth.verdict == "regression"
    assert first.verdict == "no-meaningful-change"


def test_restricted_comparison_left_out_for_outsiders(stepped, target):
    tree, _ = stepped
    secret, _ = add_head(tree, target, 16, 6.6, visibility="restricted")
    member = UserFactory.create()
    MembershipFactory.create(tree=tree, user=member)
    [outside] = history.tree_history(tree, UserFactory.create()).series
    [inside] = history.tree_history(tree, member).series
    assert secret.pk not in [p.push_id for p in outside.points]
    assert [p.push_id for p in inside.points][-1] == secret.pk
    assert len(inside.points) == len(outside.points) + 1


def test_record_change_points_once(stepped, caplog):
    tree, heads = stepped
    rows = history.record_change_points(tree, "rcu/dev")
    # Found once per audience: here every comparison is public, so both are the same.
    assert [r.audience for r in rows] == ["public", "members"]
    assert {(r.push_id, r.change_pct) for r in rows} == {(rows[0].push_id, rows[0].change_pct)}
    cp = rows[0]
    assert cp.push_id == heads[8][0].pk  # the first head after the change
    assert (cp.benchmark, cp.metric, cp.branch) == ("sync-rcu-latency", "writer_duration",
                                                    "rcu/dev")  # fmt: skip
    assert cp.change_pct == pytest.approx(100 * (6.635 / 6.035 - 1))
    assert cp.regression  # writer_duration: lower is better
    assert history.record_change_points(tree, "rcu/dev") == []
    assert ChangePoint.objects.count() == 2
    [s] = history.tree_history(tree, UserFactory.create()).series
    assert [m.push_id for m in s.change_points] == [cp.push_id]


def test_change_point_not_stored_again_when_it_moves_by_a_head(stepped, target):
    tree, heads = stepped
    rows = history.record_change_points(tree, "rcu/dev")
    # As if found a head later.
    ChangePoint.objects.filter(pk__in=[r.pk for r in rows]).update(push=heads[9][0])
    assert history.record_change_points(tree, "rcu/dev") == []


def test_flat_history_has_no_change_point(db, target):
    tree = TreeFactory.create()
    for n in range(12):
        add_head(tree, target, n, 6.0)
    assert history.record_change_points(tree, "rcu/dev") == []


def test_figure_has_band_markers_and_change_line(stepped):
    tree, _ = stepped
    history.record_change_points(tree, "rcu/dev")
    [s] = history.tree_history(tree, UserFactory.create()).series
    fig = figures.history_figure("t", s.unit, s.points, s.change_points)
    band_hi, band_lo, line = fig.data
    assert band_lo.fill == "tonexty"
    assert len(line.x) == 16
    assert all(lo <= hi for lo, hi in zip(band_lo.y, band_hi.y, strict=True))
    assert line.customdata[8][1] == s.points[8].comparison_id
    assert line.marker.color[8] == figures.VERDICT_COLORS["regression"]
    assert [shape.x0 for shape in fig.layout.shapes] == [8.5]  # before the 9th head


def test_page_renders_with_plotly(client, stepped):
    tree, _ = stepped
    history.record_change_points(tree, "rcu/dev")
    response = client.get(f"/trees/{tree.name}/history/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "plotly-graph-div" in html
    assert "/assets/plotly-" in html
    assert "cdn" not in html.lower()


def test_page_404(client, db):
    assert client.get("/trees/no-such-tree/history/").status_code == 404
    private = TreeFactory.create(public=False)
    assert client.get(f"/trees/{private.name}/history/").status_code == 404
    assert client.get(f"/api/v1/trees/{private.name}/history/").status_code == 404


def test_api_returns_points(client, stepped):
    tree, heads = stepped
    history.record_change_points(tree, "rcu/dev")
    response = client.get(f"/api/v1/trees/{tree.name}/history/")
    assert response.status_code == 200
    body = response.json()
    assert body["tree"] == tree.name
    [s] = body["series"]
    assert [p["push_id"] for p in s["points"]] == [push.pk for push, _ in heads]
    assert s["points"][0]["median"] == pytest.approx(6.035)
    assert s["change_points"][0]["regression"] is True
    other = client.get(f"/api/v1/trees/{tree.name}/history/?branch=master").json()
    assert other["series"] == []


def test_figure_has_whole_head_ticks_and_a_threshold_band_the_y_axis_spans(db, target):
    """An A/A history (every head the same kernel, medians within 0.2%): the y axis spans
    the +-2% band around the heads' median instead of filling the chart with the noise, and
    the x ticks are whole heads."""
    tree = TreeFactory.create()
    for n, level in enumerate([6.0, 6.01, 5.995, 6.005, 6.0]):
        add_head(tree, target, n, level)
    [s] = history.tree_history(tree, UserFactory.create()).series
    assert s.threshold == 2.0  # the comparisons' default
    assert s.threshold_relative
    threshold = figures.Threshold(s.threshold, s.threshold_relative)
    fig = figures.history_figure("t", s.unit, s.points, threshold=threshold)
    layout = fig.to_dict()["layout"]
    xaxis = layout["xaxis"]
    assert (xaxis["tickmode"], xaxis["tick0"], xaxis["dtick"], xaxis["tickformat"]) == (
        "linear", 0, 1, "d",
    )  # fmt: skip
    (band,) = [shape for shape in layout["shapes"] if shape["type"] == "rect"]
    level = 6.035  # the median of the heads' medians (each: its level + 0.035, 8 B runs)
    assert (band["y0"], band["y1"]) == (pytest.approx(level * 0.98), pytest.approx(level * 1.02))
    low, high = layout["yaxis"]["range"]
    assert low < band["y0"] < band["y1"] < high
    medians = [p.median for p in s.points]
    # The noise fills a small part of the axis, not all of it (autoscale's picture).
    assert (max(medians) - min(medians)) / (high - low) < 0.15
    assert "±2% of the heads' median" in layout["annotations"][0]["text"]


def test_head_step_is_a_whole_number_of_heads():
    assert [figures.head_step(n) for n in (1, 12, 13, 25, 61, 121, 600)] == [1, 1, 2, 5, 10, 20, 50]
