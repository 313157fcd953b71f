"""factory_boy factories for tests (a dev dependency; never imported by runtime code)."""

import hashlib
import itertools

import numpy as np
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
from webapp.bisections.models import Bisection, Step
from webapp.comparisons.models import Comparison, Measurement, Run, Target
from webapp.regressions import services as regressions
from webapp.regressions.models import Regression
from webapp.states import Result, State
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


# --- bisections -----------------------------------------------------------------------


def series_mbox(n: int, subject: str = "rcu: step", tag: str = "series") -> bytes:
    """A git format-patch mbox of `n` patches ("[PATCH k/n] <subject> k"), each a one-line
    change of kernel/rcu/tree.c: what engine.build.patches.parse_mbox reads. `tag` goes in
    the message-ids (<k.tag@example.org>): mboxes of different tags differ."""
    out = []
    for k in range(1, n + 1):
        out.append(
            f"From {_sha1(k)} Mon Sep 17 00:00:00 2001\n"
            f"Message-Id: <{k}.{tag}@example.org>\n"
            "From: Ada Example <ada@example.org>\n"
            "Date: Fri, 20 Nov 2026 10:00:00 +0000\n"
            f"Subject: [PATCH {k}/{n}] {subject} {k}\n\n"
            "Signed-off-by: Ada Example <ada@example.org>\n---\n"
            "diff --git a/kernel/rcu/tree.c b/kernel/rcu/tree.c\n"
            "--- a/kernel/rcu/tree.c\n+++ b/kernel/rcu/tree.c\n"
            f"@@ -1,1 +1,1 @@\n-old {k}\n+new {k}\n-- \n2.39.5\n\n"
        )
    return "".join(out).encode()


def bisectable_comparison(tree: Tree | None = None, *, patches: int = 3, visibility: str = "public",
                          submitted_by: User | None = None, shift: float = 10.0,
                          verdict: str = "regression") -> Comparison:  # fmt: skip
    """A comparison that ended ok, side B the base plus a series of `patches` patches, whose
    primary sync-rcu-latency writer_duration p50 moved by `shift` % (CI shift -+ 2, a
    smallest detectable shift of 2 %: the gate lets it through)."""
    tree = tree or TreeFactory.create()
    a = RevisionFactory.create(tree=tree, ref="v6.12")
    series = PatchSeriesFactory.create(mbox=series_mbox(patches, tag=f"s{next(_counter)}"),
                                       subject=f"[PATCH 0/{patches}] rcu: a series")  # fmt: skip
    b = RevisionFactory.create(tree=tree, ref="v6.12", series=series, base_sha=a.sha, sha="")
    c = ComparisonFactory.create(
        revision_a=a, revision_b=b, visibility=visibility, submitted_by=submitted_by,
        state="done", result="ok", verdict=verdict,
    )  # fmt: skip
    MetricVerdictFactory.create(
        comparison=c, verdict=verdict, shift_pct=shift, ci_low_pct=shift - 2,
        ci_high_pct=shift + 2, median_a=6.0, median_b=6.0 * (1 + shift / 100),
        details={"unit": "ms", "relative": True, "adjustment": "holm", "shift": shift,
                 "ci": [shift - 2, shift + 2], "smallest_detectable_shift": 2.0},
    )  # fmt: skip
    return c


class BisectionFactory(DjangoModelFactory[Bisection]):
    """A bisection of a series of three patches (make its comparison bisectable_comparison
    for a consistent whole)."""

    class Meta:
        model = Bisection

    comparison = SubFactory(ComparisonFactory)
    mode = Bisection.Mode.BISECT
    kind = Bisection.Kind.SERIES
    benchmark = "sync-rcu-latency"
    metric = "writer_duration"
    statistic = "p50"
    unit = "%"
    effect = 10.0
    effect_low = 8.0
    effect_high = 12.0
    original_verdict = "regression"
    commits = LazyFunction(lambda: [
        {"sha": "", "subject": f"rcu: step {k}", "author": "Ada Example <ada@example.org>",
         "link": f"<{k}.series@example.org>"} for k in (1, 2, 3)
    ])  # fmt: skip
    trigger = Bisection.Trigger.WEB


class StepFactory(DjangoModelFactory[Step]):
    class Meta:
        model = Step

    bisection = SubFactory(BisectionFactory)
    kind = Step.Kind.BISECT
    position = 1


def reported_regression(tree: Tree | None = None, shift: float = 16.7) -> Regression:
    """The regression a finished comparison (bisectable_comparison) reported."""
    found = regressions.open_for_comparison(bisectable_comparison(tree, shift=shift).pk)
    assert found is not None
    return found


# --- a sweep's point, ended --------------------------------------------------------------


def ended_point(
    c: Comparison, a_scale: float, b_scale: float, rng: np.random.Generator, runs: int = 12,
    verdict: str = "no-meaningful-change", p: float = 0.5,
) -> None:  # fmt: skip
    """The point's comparison ended ok with `runs` runs a side whose p50 is 6 ms x scale
    (2% noise between runs), and its primary's final row; the benchmark is the comparison's
    first (sync-rcu-latency or a variant of it)."""
    bench = c.benchmarks[0]
    for side, scale in (("A", a_scale), ("B", b_scale)):
        for k in range(runs):
            run = Run.objects.create(comparison=c, benchmark=bench, side=side,
                                     index=k, order=2 * k + (side == "B"), state=State.DONE,
                                     result=Result.OK)  # fmt: skip
            level = 6.0 * scale * rng.lognormal(0, 0.02)
            Measurement.objects.create(
                run=run,
                benchmark=bench,
                metric="writer_duration",
                unit="ms",
                samples=list(level * rng.lognormal(0, 0.01, 51)),
            )
    MetricVerdict.objects.create(
        comparison=c, benchmark=bench, metric="writer_duration", statistic="p50",
        is_primary=True, look=1, n_a=runs, n_b=runs, median_a=6 * a_scale, median_b=6 * b_scale,
        shift_pct=100 * (b_scale / a_scale - 1), ci_low_pct=-1.0, ci_high_pct=1.0, p_value=p,
        verdict=verdict,
    )  # fmt: skip
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok", verdict=verdict)
