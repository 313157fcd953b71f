"""Bisecting a push range (first-parent commits) on a real git repository: the steps name
commits, a merge is one position, and the confirmation reverts the culprit from head
through the same preflight a submitter's series goes through."""

import pytest

from engine.build.tests.test_history import commit, git
from engine.build.tests.test_history import repo as repo  # the fixture
from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MetricVerdictFactory,
    RevisionFactory,
    TreeFactory,
)
from webapp.bisections import services
from webapp.bisections.models import Bisection, Step
from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db


@pytest.fixture
def pushed(repo, settings):  # noqa: F811
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    git_dir, (base, _, _, three) = repo
    tree = TreeFactory.create(name="scratch", url=str(git_dir))
    rev_a = RevisionFactory.create(tree=tree, ref=base, base_sha=base, sha=base)
    rev_b = RevisionFactory.create(tree=tree, ref="main", base_sha=three, sha=three)
    c = ComparisonFactory.create(
        revision_a=rev_a, revision_b=rev_b, build_a=BuildFactory.create(revision=rev_a),
        build_b=BuildFactory.create(revision=rev_b), min_runs=5, max_runs=10,
        verdict="regression", state="done", result="ok",
    )  # fmt: skip
    MetricVerdictFactory.create(
        comparison=c, shift_pct=10.0, ci_low_pct=8.0, ci_high_pct=12.0, verdict="regression",
        details={"unit": "ms", "relative": True, "shift": 10.0, "ci": [8.0, 12.0],
                 "smallest_detectable_shift": 1.0},
    )  # fmt: skip
    return c, repo


def _end(step: Step, shift: float, low: float, high: float) -> None:
    assert step.comparison is not None
    Comparison.objects.filter(pk=step.comparison.pk).update(state="done", result="ok")
    MetricVerdictFactory.create(
        comparison=step.comparison, shift_pct=shift, ci_low_pct=low, ci_high_pct=high,
        verdict="regression" if low > 0 else "no-meaningful-change",
        details={"unit": "ms", "relative": True, "shift": shift, "ci": [low, high]},
    )  # fmt: skip


def test_a_push_range_is_bisected_by_commit_and_the_culprit_reverted_from_head(pushed):
    c, (_, (base, one, merge, three)) = pushed
    b, _ = services.start(c.pk)
    assert (b.kind, [x["sha"] for x in b.commits]) == ("range", [one, merge, three])
    services.advance(b.pk)
    step = b.steps.get()
    assert step.position == 1  # 1 and 2 are as near the middle (1.5): the lower
    assert step.comparison is not None
    assert (step.comparison.revision_a.ref, step.comparison.revision_b.ref) == (base, one)
    _end(step, 10.1, 9.0, 11.2)  # the first commit already moved it
    services.advance(b.pk)
    b.refresh_from_db()
    assert (b.state, b.first) == ("confirming", 1)
    fresh, revert = b.steps.get(kind="fresh"), b.steps.get(kind="revert")
    assert fresh.comparison is not None
    assert revert.comparison is not None
    assert (fresh.comparison.revision_a.ref, fresh.comparison.revision_b.ref) == (base, one)
    assert revert.comparison.revision_a.ref == three
    series = revert.comparison.revision_b.series
    assert series is not None
    assert f"This reverts commit {one}".encode() in bytes(series.mbox)


def test_a_revert_that_does_not_apply_on_head_is_said_and_the_rerun_alone_confirms(pushed):
    c, (git_dir, _) = pushed
    # Head moves on past the culprit's lines: its revert no longer applies there.
    work = git_dir.parent
    git(work, "checkout", "-q", "main")
    four = commit(work, "tree.c", "int a;\nint b = 2;\nint c;\n", "rcu: four")
    c.revision_b.sha = c.revision_b.base_sha = four
    c.revision_b.save()
    assert c.build_b is not None
    c.build_b.sha = four
    c.build_b.save()
    b, _ = services.start(c.pk)
    assert b.n == 4
    services.advance(b.pk)
    for expected in (2, 1):  # like B at 2, then at 1
        step = b.steps.get(kind="bisect", position=expected)
        _end(step, 10.0, 9.0, 11.0)
        services.advance(b.pk)
    b.refresh_from_db()
    assert (b.state, b.first) == ("confirming", 1)
    revert = b.steps.get(kind="revert")
    assert (revert.answer, revert.comparison) == ("skipped", None)
    assert "not run" in revert.reason
    assert "does not apply" in revert.reason
    _end(b.steps.get(kind="fresh"), 10.0, 9.0, 11.0)
    services.advance(b.pk)
    b.refresh_from_db()
    assert (b.outcome, b.first) == (Bisection.Outcome.CULPRIT, 1)
    assert "the revert was not tried" in b.summary
