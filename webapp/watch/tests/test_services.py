"""Watched pushes through the watch service against a real git repository: what is ignored,
the baseline rule (first push, fast-forward, force-push, a head tested already), coalescing,
the active limit, anchor comparisons and polling."""

import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from tests.support.factories import TargetFactory, TreeFactory
from webapp.comparisons.models import Comparison
from webapp.watch import services
from webapp.watch.events import ZERO_SHA, BadPush, PushEvent
from webapp.watch.models import Push, WatchPolicy

pytestmark = pytest.mark.django_db

GIT_ENV = {
    **os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
}  # fmt: skip


class Repo:
    """A bare repository (the tree) and a clone that commits and pushes to it."""

    def __init__(self, root: Path) -> None:
        self.bare, self.work = root / "tree.git", root / "work"
        self.git("init", "--quiet", "--bare", "-b", "master", str(self.bare), cwd=root)
        self.git("clone", "--quiet", str(self.bare), str(self.work), cwd=root)
        self.commit("v6.12")
        self.git("tag", "-a", "-m", "v6.12", "v6.12")
        self.git("push", "--quiet", "origin", "master", "v6.12")

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=cwd or self.work, env=GIT_ENV, check=True,
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout.strip()

    def commit(self, message: str) -> str:
        (self.work / "file").write_text(message + "\n")
        self.git("add", "file")
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD")

    def sha(self, ref: str) -> str:
        return self.git("rev-parse", f"{ref}^{{commit}}")


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path)


@pytest.fixture
def policy(repo) -> WatchPolicy:
    tree = TreeFactory.create(name="rcu", url=str(repo.bare))
    p = WatchPolicy.objects.create(
        tree=tree, branches=["master", "rcu/*"], start_ref="v6.12",
        benchmarks=["sync-rcu-latency"], coalesce_seconds=0, anchor_every=0,
    )  # fmt: skip
    p.targets.add(TargetFactory.create())
    return p


def _push(policy, repo, ref="refs/heads/master", before=None, after=None, **kw) -> Push:
    after = after or repo.sha("HEAD")
    event = PushEvent(ref=ref, before=before or ZERO_SHA, after=after, source="git", **kw)
    got = services.receive_push(policy.tree, event)
    assert got.push is not None, got.reason
    return got.push


def _tested(push: Push) -> Comparison:
    push = services.process_push(push.pk)
    assert push.state == Push.State.TESTED, push.reason
    (c,) = push.comparisons.select_related("revision_a", "revision_b")
    return c


@pytest.mark.parametrize(
    ("ref", "after", "reason"),
    [
        ("refs/heads/next", "1" * 40, "branch next is not watched (watched: master, rcu/*)"),
        ("refs/heads/master", ZERO_SHA, "refs/heads/master was deleted: nothing to test"),
        ("refs/tags/v6.13", "1" * 40,
         "tag v6.13 ignored: tags are not watched (tag patterns: none)"),
    ],
)  # fmt: skip
def test_what_is_not_tested_is_refused_with_its_reason_and_stores_nothing(
    policy, ref, after, reason
):
    got = services.receive_push(policy.tree, PushEvent(ref, "2" * 40, after, "git"))
    assert (got.push, got.reason) == (None, reason)
    assert not Push.objects.exists()


def test_a_tag_is_tested_where_its_pattern_is_watched(policy, repo):
    policy.tag_patterns = ["v6.*"]
    policy.save()
    got = services.receive_push(policy.tree, PushEvent("refs/tags/v6.13", ZERO_SHA,
                                                       repo.sha("HEAD"), "git"))  # fmt: skip
    assert got.push is not None
    assert got.push.is_tag


def test_an_unwatched_tree_is_refused(repo):
    tree = TreeFactory.create(url=str(repo.bare))
    got = services.receive_push(tree, PushEvent("refs/heads/master", ZERO_SHA, "1" * 40, "git"))
    assert got.reason == f"tree {tree.name} is not watched"


@pytest.mark.parametrize(
    "kw",
    [{"before": "x" * 40}, {"after": "ABC"}, {"ref": "master"}, {"ref": "refs/heads/a..b"},
     {"ref": "refs/heads/a b"}],
)  # fmt: skip
def test_a_malformed_event_is_refused(kw):
    fields = {"ref": "refs/heads/master", "before": ZERO_SHA, "after": "1" * 40, "source": "git"}
    with pytest.raises(BadPush):
        PushEvent(**{**fields, **kw})


def test_the_first_push_is_compared_with_the_start_ref_then_each_with_the_previous_head(
    policy, repo
):
    first = repo.commit("one")
    repo.git("push", "--quiet", "origin", "master")
    c1 = _tested(_push(policy, repo))
    assert (c1.revision_a.ref, c1.revision_b.ref) == (repo.sha("v6.12"), first)
    assert c1.trigger == "webhook"
    assert "the start ref v6.12" in Push.objects.get(comparisons=c1).baseline_rule
    second = repo.commit("two")
    repo.git("push", "--quiet", "origin", "master")
    c2 = _tested(_push(policy, repo, before=first))
    assert (c2.revision_a.ref, c2.revision_b.ref) == (first, second)
    assert "the previous tested head" in Push.objects.get(comparisons=c2).baseline_rule


def test_after_a_force_push_the_baseline_is_the_merge_base(policy, repo):
    base = repo.commit("one")
    repo.git("push", "--quiet", "origin", "master")
    old = repo.commit("two")
    repo.git("push", "--quiet", "origin", "master")
    _tested(_push(policy, repo))
    repo.git("reset", "--quiet", "--hard", base)
    new = repo.commit("two, rewritten")
    repo.git("push", "--quiet", "--force", "origin", "master")
    c = _tested(_push(policy, repo, before=old, forced=True))
    assert (c.revision_a.ref, c.revision_b.ref) == (base, new)
    assert "merge base" in Push.objects.get(comparisons=c).baseline_rule


def test_a_head_tested_already_is_skipped(policy, repo):
    repo.commit("one")
    repo.git("push", "--quiet", "origin", "master")
    _tested(_push(policy, repo))
    again = services.process_push(_push(policy, repo).pk)
    assert again.state == Push.State.SKIPPED
    assert "was tested already" in again.reason
    assert Comparison.objects.count() == 1


def test_pushes_within_the_window_give_one_comparison_of_the_newest_head(policy, repo):
    policy.coalesce_seconds = 60
    policy.save()
    repo.commit("one")
    first = _push(policy, repo)
    newest = repo.commit("two")
    repo.git("push", "--quiet", "origin", "master")
    second = _push(policy, repo)
    assert services.process_push(first.pk).state == Push.State.PENDING  # not due yet
    Push.objects.update(received_at=timezone.now() - timedelta(seconds=61))
    first = services.process_push(first.pk)
    assert first.state == Push.State.SUPERSEDED
    assert f"superseded by push {second.pk}" in first.reason
    c = _tested(second)
    assert c.revision_b.ref == newest
    assert Comparison.objects.count() == 1


def test_a_queued_comparison_of_an_older_head_is_cancelled_when_a_newer_one_is_tested(policy, repo):
    repo.commit("one")
    repo.git("push", "--quiet", "origin", "master")
    older = _tested(_push(policy, repo))
    repo.commit("two")
    repo.git("push", "--quiet", "origin", "master")
    newer_push = _push(policy, repo)
    _tested(newer_push)
    older.refresh_from_db()
    assert (older.state, older.error_code) == ("done", "cancelled")
    assert older.error_message == f"superseded by push {newer_push.pk} ({repo.sha('HEAD')[:12]})"


def test_a_push_over_the_active_limit_waits_then_is_taken_up(policy, repo):
    policy.max_active = 1
    policy.save()
    repo.commit("one")
    repo.git("push", "--quiet", "origin", "master", "master:rcu/dev")
    running = _tested(_push(policy, repo))
    waiting = services.process_push(_push(policy, repo, ref="refs/heads/rcu/dev").pk)
    assert waiting.state == Push.State.PENDING
    assert waiting.reason == (
        "waiting: 1 of the tree's push comparisons are queued or running (limit 1)"
    )
    Comparison.objects.filter(pk=running.pk).update(state="done", result="ok")
    assert services.watch_tick()["pending"] == 1
    waiting.refresh_from_db()
    assert waiting.state == Push.State.TESTED


def test_every_nth_tested_head_is_also_compared_with_the_anchor(policy, repo):
    policy.anchor_ref, policy.anchor_every = "v6.12", 2
    policy.save()
    for i in range(2):
        repo.commit(f"step {i}")
        repo.git("push", "--quiet", "origin", "master")
        _tested(_push(policy, repo))
    anchor = Push.objects.get(anchor=True)
    assert anchor.baseline == repo.sha("v6.12")
    c = _tested(anchor)
    assert (c.revision_a.ref, c.revision_b.ref) == (repo.sha("v6.12"), repo.sha("HEAD"))
    assert "anchor comparison" in c.requested_by


def test_an_unknown_start_ref_fails_the_push_with_its_reason(policy, repo):
    policy.start_ref = "v9.99"
    policy.save()
    push = services.process_push(_push(policy, repo).pk)
    assert push.state == Push.State.FAILED
    assert "v9.99" in push.reason
    assert not Comparison.objects.exists()


def test_polling_feeds_each_moved_head_once(policy, repo):
    policy.poll_seconds = 60
    policy.save()
    repo.commit("one")
    repo.git("push", "--quiet", "origin", "master", "master:rcu/dev", "master:other")
    assert services.poll_tree(policy) == 2  # master and rcu/dev; other is not watched
    assert set(Push.objects.values_list("branch", "source")) == {("master", "poll"),
                                                                 ("rcu/dev", "poll")}  # fmt: skip
    assert services.poll_tree(policy) == 0
    repo.commit("two")
    repo.git("push", "--quiet", "origin", "master")
    assert services.poll_tree(policy) == 1


# --- a policy's sweep (WatchPolicy.sweep_*) ----------------------------------------------


def _sweeping(policy, values=("1", "4"), every=1) -> WatchPolicy:
    policy.sweep_axis, policy.sweep_parameter = "variant", "rcuscale.nwriters"
    policy.sweep_values, policy.sweep_every = list(values), every
    policy.full_clean()
    policy.save()
    return policy


def _pushed(policy, repo, message) -> Push:
    repo.commit(message)
    repo.git("push", "--quiet", "origin", "master")
    push = services.process_push(_push(policy, repo).pk)
    assert push.state == Push.State.TESTED, push.reason
    return push


def test_every_nth_tested_head_is_also_swept_beside_its_comparison(policy, repo):
    policy.max_active = 10  # the limit is the next test's
    _sweeping(policy, every=2)
    first = _pushed(policy, repo, "one")
    assert not first.sweeps.exists()
    assert "sweep" not in first.reason
    second = _pushed(policy, repo, "two")
    (sweep,) = second.sweeps.all()
    assert second.reason.endswith(f"; sweep #{sweep.pk}")
    assert (sweep.axis, sweep.trigger) == ("variant", "webhook")
    points = [p.comparison for p in sweep.points.select_related("comparison__revision_b")]
    assert [c.benchmarks for c in points] == [
        ["sync-rcu-latency"], ["sync-rcu-latency--nwriters-4"]]  # fmt: skip
    assert {c.revision_b.ref for c in points} == {repo.sha("HEAD")}
    # Its points count toward the tree's active limit, beside the push's comparison.
    active = set(services.active_comparisons(policy.tree).values_list("pk", flat=True))
    assert active == {*(c.pk for c in points), *second.comparisons.values_list("pk", flat=True)}
    # A newer tested head cancels the older sweep none of whose points has started, as it
    # cancels the older queued comparison; the next sweep is the fourth head's.
    third = _pushed(policy, repo, "three")
    assert not third.sweeps.exists()
    reasons = {p.comparison.error_message for p in sweep.points.select_related("comparison")}
    assert reasons == {f"sweep #{sweep.pk} cancelled as superseded by push {third.pk} "
                       f"({repo.sha('HEAD')[:12]})"}  # fmt: skip
    assert _pushed(policy, repo, "four").sweeps.count() == 1


def test_a_refused_sweep_is_said_on_the_push_and_its_comparison_stands(policy, repo):
    _sweeping(policy, values=("1", "64"))
    push = _pushed(policy, repo, "one")
    assert push.reason.endswith(
        "; sweep refused: values: rcuscale.nwriters=64: not a whole number in [1, 32]"
    )
    assert push.comparisons.count() == 1
    assert not push.sweeps.exists()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"sweep_values": ["1", "2"]}, "sweep_axis", "need an axis"),
        ({"sweep_axis": "variant", "sweep_parameter": "rcuscale.nwriters",
          "sweep_values": ["1"]}, "sweep_values", "at least two values"),
        ({"sweep_axis": "cmdline", "sweep_values": ["1", "2"]}, "sweep_parameter",
         "a cmdline sweep needs a parameter"),
        ({"sweep_axis": "topology", "sweep_parameter": "x", "sweep_values": ["2", "4"]},
         "sweep_parameter", "a topology sweep takes no parameter"),
    ],
)  # fmt: skip
def test_a_policys_sweep_fields_hang_together(policy, fields, field, message):
    for k, v in fields.items():
        setattr(policy, k, v)
    with pytest.raises(ValidationError) as exc:
        policy.full_clean()
    assert message in " ".join(exc.value.message_dict[field])


def test_a_sweeps_points_hold_the_next_push_at_the_active_limit(policy, repo):
    _sweeping(policy)  # max_active 2: the push's comparison and two points are 3
    _pushed(policy, repo, "one")
    repo.commit("two")
    repo.git("push", "--quiet", "origin", "master")
    waiting = services.process_push(_push(policy, repo).pk)
    assert waiting.state == Push.State.PENDING
    assert waiting.reason == (
        "waiting: 3 of the tree's push comparisons are queued or running (limit 2)"
    )
