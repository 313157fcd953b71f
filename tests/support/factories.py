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
