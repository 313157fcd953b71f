"""Watched trees: what a tree's admins ask rcubench to test on each push, the pushes it
received (from a webhook or its own polling), and the change points found in a branch's
history of tested heads."""

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from stats import defaults
from webapp.comparisons.models import Comparison, Target
from webapp.sweeps.models import Sweep
from webapp.trees.models import Tree, sha_validator


class WatchPolicy(models.Model):
    """What a push to one of the tree's watched branches starts: a comparison of the new
    head (side B) against its baseline (side A) on each of `targets`."""

    tree = models.OneToOneField(Tree, on_delete=models.CASCADE, related_name="watch")
    enabled = models.BooleanField(default=True)
    branches = ArrayField(
        models.CharField(max_length=255),
        help_text="Branch name patterns (fnmatch: master, rcu/*), without refs/heads/.",
    )
    tag_patterns = ArrayField(
        models.CharField(max_length=255), default=list, blank=True,
        help_text="Tags are ignored unless they match one of these patterns (e.g. v6.*).",
    )  # fmt: skip
    start_ref = models.CharField(
        max_length=255,
        help_text="The baseline of a branch's first tested push (e.g. the release it forks from).",
    )
    benchmarks = ArrayField(models.CharField(max_length=64))
    targets = models.ManyToManyField(Target, related_name="+")
    min_runs = models.PositiveSmallIntegerField(default=defaults.MIN_RUNS)
    max_runs = models.PositiveSmallIntegerField(default=defaults.MAX_RUNS)
    threshold_pct = models.FloatField(default=defaults.THRESHOLD_PCT)
    coalesce_seconds = models.PositiveIntegerField(
        default=300,
        help_text="Pushes to a branch within this window are tested once, at the newest head.",
    )
    max_active = models.PositiveSmallIntegerField(
        default=2, validators=[MinValueValidator(1)],
        help_text="At most this many of the tree's push comparisons queued or running at "
        "once; later pushes wait.",
    )  # fmt: skip
    anchor_ref = models.CharField(
        max_length=255, blank=True,
        help_text="A release tag each branch is compared against every `anchor_every` "
        "tested heads, so that a drift of sub-threshold steps is one measured A/B.",
    )  # fmt: skip
    anchor_every = models.PositiveSmallIntegerField(
        default=10, help_text="0: anchor comparisons on demand only."
    )
    poll_seconds = models.PositiveIntegerField(
        default=0,
        help_text="For trees without webhooks: check the branches with git ls-remote this "
        "often (0: never).",
    )
    polled_at = models.DateTimeField(null=True, blank=True)
    # A sweep of the tested head against its baseline (docs/sweeps.md), beside its
    # comparisons: on the first target, every `sweep_every`-th tested head of a branch.
    sweep_axis = models.CharField(
        max_length=16, blank=True, choices=Sweep.Axis.choices,
        help_text="Also sweep tested heads against their baselines along this axis, on the "
        "first target (blank: no sweep). Each point runs min_runs to max_runs a side.",
    )  # fmt: skip
    sweep_parameter = models.CharField(
        max_length=128, blank=True,
        help_text="The boot parameter (cmdline axis) or the first benchmark's parameter "
        "(variant axis, e.g. rcuscale.nwriters).",
    )  # fmt: skip
    sweep_values = ArrayField(
        models.CharField(max_length=64), default=list, blank=True,
        help_text="The axis' values: vCPU counts or SxCxT, or the parameter's values.",
    )  # fmt: skip
    sweep_every = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1)],
        help_text="Sweep every this many tested heads of a branch (1: each one).",
    )  # fmt: skip
    # Which commit of a push's range did it (docs/bisection.md): started when a tested
    # head's comparison ends with a primary regression that the bisection gate lets through.
    bisect_regressions = models.BooleanField(
        default=False,
        help_text="Bisect the range of a tested head whose comparison ends with a primary "
        "regression (not anchors; the gate may refuse it, and the push says why).",
    )  # fmt: skip

    class Meta:
        verbose_name_plural = "watch policies"
        constraints = [
            models.CheckConstraint(condition=~Q(branches=[]), name="watch_has_branches"),
            models.CheckConstraint(condition=~Q(benchmarks=[]), name="watch_has_benchmarks"),
            models.CheckConstraint(
                condition=Q(max_runs__gte=models.F("min_runs")), name="watch_runs_bounds"
            ),
        ]

    def __str__(self) -> str:
        return f"watch {self.tree}: {', '.join(self.branches)}"

    def clean(self) -> None:
        """The sweep's fields hang together (the sweep service checks the values
        themselves when a push submits it, and the push says what it refused)."""
        if not self.sweep_axis:
            if self.sweep_parameter or self.sweep_values:
                raise ValidationError({"sweep_axis": "a sweep's parameter or values need an axis"})
            return
        if len(self.sweep_values) < 2:
            raise ValidationError({"sweep_values": "a sweep has at least two values"})
        needs = self.sweep_axis != Sweep.Axis.TOPOLOGY
        if needs != bool(self.sweep_parameter):
            what = "needs a parameter" if needs else "takes no parameter"
            raise ValidationError({"sweep_parameter": f"a {self.sweep_axis} sweep {what}"})


class Push(models.Model):
    """A new head of a watched ref, as received. Each is tested (a comparison per target),
    superseded by a newer push within the coalescing window, or ignored with its reason."""

    class Source(models.TextChoices):
        GITHUB = "github", "GitHub"
        GITLAB = "gitlab", "GitLab"
        GIT = "git", "Generic git hook"
        POLL = "poll", "Polling (git ls-remote)"
        ANCHOR = "anchor", "Anchor comparison"

    class State(models.TextChoices):
        PENDING = "pending"  # in the coalescing window, or waiting for the active limit
        TESTED = "tested"  # its comparisons were submitted
        SUPERSEDED = "superseded"  # a newer head of the branch came within the window
        SKIPPED = "skipped"  # its head was tested already (reason says by which push)
        FAILED = "failed"  # could not be submitted (reason says why)

    tree = models.ForeignKey(Tree, on_delete=models.CASCADE, related_name="pushes")
    branch = models.CharField(max_length=255, help_text="Branch (or tag) name, without refs/…/.")
    is_tag = models.BooleanField(default=False)
    before = models.CharField(max_length=40, validators=[sha_validator])
    after = models.CharField(max_length=40, validators=[sha_validator])
    forced = models.BooleanField(default=False, help_text="The sender said it was a force-push.")
    pusher_email = models.EmailField(
        blank=True, help_text="Who pushed, where the payload says (mailed on a regression)."
    )
    source = models.CharField(max_length=16, choices=Source)
    state = models.CharField(max_length=16, choices=State, default=State.PENDING)
    reason = models.TextField(blank=True)
    baseline = models.CharField(
        max_length=40, blank=True, validators=[sha_validator],
        help_text="The commit its head was compared against.",
    )  # fmt: skip
    baseline_rule = models.CharField(max_length=200, blank=True)
    anchor = models.BooleanField(
        default=False, help_text="An anchor comparison: the head against the anchor ref."
    )
    comparisons = models.ManyToManyField(Comparison, blank=True, related_name="pushes")
    sweeps = models.ManyToManyField(Sweep, blank=True, related_name="pushes")
    received_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the branch's history was searched for change points after its "
        "comparisons ended.",
    )  # fmt: skip

    class Meta:
        ordering = ["-received_at", "-pk"]
        indexes = [models.Index(fields=["tree", "branch", "-received_at"], name="push_branch")]

    def __str__(self) -> str:
        return f"{self.tree}:{self.branch} {self.after[:12]} ({self.state})"


class ChangePoint(models.Model):
    """A shift in a branch's history of a primary metric, found over its tested heads.

    Found twice, once per audience (webapp.access.sees_all_of): over the public comparisons
    only, for everyone who sees the tree, and over all of them, restricted ones included,
    for its members and staff only. Each reader sees, and each subscriber is mailed, one of
    the two: medians of restricted runs never reach anyone who may not see those runs."""

    class Audience(models.TextChoices):
        PUBLIC = "public", "everyone who sees the tree (public comparisons only)"
        MEMBERS = "members", "the tree's members and staff (all its comparisons)"

    tree = models.ForeignKey(Tree, on_delete=models.CASCADE, related_name="change_points")
    branch = models.CharField(max_length=255)
    benchmark = models.CharField(max_length=64)
    metric = models.CharField(max_length=64)
    target = models.ForeignKey(Target, on_delete=models.CASCADE, related_name="+")
    push = models.ForeignKey(
        Push, on_delete=models.CASCADE, related_name="change_points",
        help_text="The first tested head after the change.",
    )  # fmt: skip
    before_median = models.FloatField()
    after_median = models.FloatField()
    change_pct = models.FloatField()
    regression = models.BooleanField(help_text="In the metric's worse direction.")
    audience = models.CharField(
        max_length=16, choices=Audience,
        help_text="Whose comparisons it was found over, and so who may see it.",
    )  # fmt: skip
    found_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-found_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tree", "branch", "benchmark", "metric", "target", "push", "audience"],
                name="change_point_once",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tree}:{self.branch} {self.benchmark}/{self.metric} {self.change_pct:+.1f}%"
