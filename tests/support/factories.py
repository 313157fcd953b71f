"""factory_boy factories for tests (a dev dependency; never imported by runtime code)."""

import hashlib
import itertools

from django.contrib.auth.models import User
from factory.declarations import (
    LazyAttribute,
    LazyFunction,
    PostGenerationMethodCall,
    SelfAttribute,
    Sequence,
    SubFactory,
)
from factory.django import DjangoModelFactory

from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, Measurement, Run, Target
from webapp.trees.models import Build, PatchSeries, Revision, Tree, TreeMembership
from webapp.watch.models import Push

_counter = itertools.count()


def _sha1(n: int) -> str:
    return hashlib.sha1(str(n).encode(), usedforsecurity=False).hexdigest()


class TreeFactory(DjangoModelFactory[Tree]):
    class Meta:
        model = Tree
        django_get_or_create = ("name",)

    name = Sequence(lambda n: f"tree-{n}")
    url = "https://git.kernel.org/pub/scm/linux/kernel/git/rcu/linux.git"


PASSWORD = "correct horse battery staple"


class UserFactory(DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = Sequence(lambda n: f"dev{n}")
    email = LazyAttribute(lambda o: f"{o.username}@example.org")
    password = PostGenerationMethodCall("set_password", PASSWORD)

    @classmethod
    def _after_postgeneration(cls, instance: User, create: bool, results: object = None) -> None:
        if create:
            instance.save()


class MembershipFactory(DjangoModelFactory[TreeMembership]):
    class Meta:
        model = TreeMembership

    tree = SubFactory(TreeFactory)
    user = SubFactory(UserFactory)
    role = TreeMembership.Role.SUBMITTER


class PatchSeriesFactory(DjangoModelFactory[PatchSeries]):
    class Meta:
        model = PatchSeries

    subject = Sequence(lambda n: f"[PATCH 0/{n}] rcu: example series {n}")
    mbox = Sequence(lambda n: f"From example {n}\n".encode())
    mbox_sha256 = LazyAttribute(lambda o: hashlib.sha256(o.mbox).hexdigest())


class RevisionFactory(DjangoModelFactory[Revision]):
    class Meta:
        model = Revision

    tree = SubFactory(TreeFactory)
    ref = "master"
    base_sha = LazyFunction(lambda: _sha1(next(_counter)))
    sha = LazyAttribute(lambda o: o.base_sha)


class BuildFactory(DjangoModelFactory[Build]):
    class Meta:
        model = Build

    revision = SubFactory(RevisionFactory)
    sha = LazyAttribute(lambda o: o.revision.sha)
    arch = "x86_64"
    config_hash = LazyFunction(lambda: hashlib.sha256(str(next(_counter)).encode()).hexdigest())
    toolchain = "gcc (Debian 12.2.0-14+deb12u1) 12.2.0"


class TargetFactory(DjangoModelFactory[Target]):
    class Meta:
        model = Target
        django_get_or_create = ("name",)

    name = "qemu-x86_64"
    kind = "qemu"
    arch = "x86_64"
    cores = 2
    threads = 2


class ComparisonFactory(DjangoModelFactory[Comparison]):
    class Meta:
        model = Comparison

    revision_a = SubFactory(RevisionFactory)
    revision_b = SubFactory(RevisionFactory, tree=SelfAttribute("..revision_a.tree"))
    benchmarks = LazyFunction(lambda: ["sync-rcu-latency"])
    target = SubFactory(TargetFactory)
    trigger = Comparison.Trigger.CLI


class RunFactory(DjangoModelFactory[Run]):
    class Meta:
        model = Run

    comparison = SubFactory(ComparisonFactory)
    benchmark = "sync-rcu-latency"
    side = "A"
    index = Sequence(lambda n: n)
    order = Sequence(lambda n: n)


class MeasurementFactory(DjangoModelFactory[Measurement]):
    class Meta:
        model = Measurement

    run = SubFactory(RunFactory)
    benchmark = "sync-rcu-latency"
    metric = "writer_duration"
    unit = "ms"
    samples = LazyFunction(lambda: [6.0, 6.1, 5.9])


class MetricVerdictFactory(DjangoModelFactory[MetricVerdict]):
    class Meta:
        model = MetricVerdict

    comparison = SubFactory(ComparisonFactory)
    benchmark = "sync-rcu-latency"
    metric = "writer_duration"
    statistic = "p50"
    is_primary = True
    look = 1
    n_a = 24
    n_b = 24
    median_a = 6.0
    median_b = 6.0
    shift_pct = 0.0
    ci_low_pct = -1.0
    ci_high_pct = 1.0
    p_value = 0.5
    p_adjusted = 0.5
    verdict = "no-meaningful-change"
    details = LazyFunction(lambda: {"unit": "ms", "relative": True, "adjustment": "holm"})


# --- a watched branch's history -------------------------------------------------------

HISTORY_RUNS = 8  # per side: enough for a 95% order-statistic CI of the median


def head_sha(n: int) -> str:
    """A distinct sha per n, whose 12-digit short form (what pages show) is distinct too."""
    return _sha1(n)


def watched_head(tree: Tree, target: Target, n: int, level: float, *, visibility: str = "public",
                branch: str = "rcu/dev", verdict: str = "no-meaningful-change",
                state: str = "tested", anchor: bool = False,
                done: bool = True) -> tuple[Push, Comparison]:  # fmt: skip
    """A tested push of `branch` (head head_sha(1000 + n)) whose comparison's B runs have
    writer_duration medians `level` + 0.01 * run (A at 6.0), plus a failed B run (no data)."""
    rev_a = RevisionFactory.create(tree=tree, ref="v6.12")
    rev_b = RevisionFactory.create(tree=tree, ref=branch, sha=head_sha(1000 + n))
    c = ComparisonFactory.create(
        revision_a=rev_a, revision_b=rev_b, target=target, visibility=visibility,
        state="done" if done else "running", result="ok" if done else "",
        verdict=verdict if done else "",
    )  # fmt: skip
    order = 0
    for i in range(HISTORY_RUNS):
        for side in "AB":
            run = RunFactory.create(comparison=c, side=side, index=i, order=order,
                                    state="done", result="ok")  # fmt: skip
            order += 1
            base = 6.0 if side == "A" else level
            MeasurementFactory.create(run=run, samples=[base + 0.01 * i - 0.1, base + 0.01 * i,
                                                        base + 0.01 * i + 0.1])  # fmt: skip
    # A failed run is no data (analysis.services.counted_runs), whatever it measured.
    failed = RunFactory.create(comparison=c, side="B", index=HISTORY_RUNS, order=order,
                               state="done", result="failed", error_code="panic")  # fmt: skip
    MeasurementFactory.create(run=failed, samples=[60.0])
    MetricVerdictFactory.create(comparison=c, verdict=verdict, median_a=6.0, median_b=level)
    push = Push.objects.create(
        tree=tree, branch=branch, before=head_sha(n), after=head_sha(1000 + n), source="git",
        state=state, anchor=anchor,
    )  # fmt: skip
    push.comparisons.add(c)
    return push, c
