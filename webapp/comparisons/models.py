"""A/B comparisons, the targets they run on, their runs and per-run measurements."""

import secrets

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from engine.run import outcomes
from stats import defaults
from webapp.routing import bench_queue
from webapp.states import (
    Arch,
    Result,
    TrackedStep,
    error_code_iff_unsuccessful,
    result_only_when_done,
)
from webapp.trees.models import Build, Revision


class Target(models.Model):
    """Where runs execute: a QEMU machine shape or a pool of lab machines; one queue each.

    A derived target (`base` set) is a QEMU target generated from its base with another
    topology, for a sweep (webapp/comparisons/targets.py): it runs on its base's queue, by
    the workers that serve the base, and is enabled only while its base is.
    """

    class Kind(models.TextChoices):
        QEMU = "qemu", "QEMU VM under libvirt"
        LAB = "lab", "Bare-metal lab pool"

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=Kind)
    arch = models.CharField(max_length=16, choices=Arch)
    sockets = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    cores = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    threads = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1)], help_text="SMT threads per core."
    )
    memory_mb = models.PositiveIntegerField(default=1024, validators=[MinValueValidator(64)])
    machine = models.CharField(
        max_length=64, blank=True, help_text="QEMU machine type (e.g. pseries, powernv9, q35)."
    )
    enabled = models.BooleanField(default=True)
    description = models.TextField(blank=True)
    base = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="derived",
        help_text="Set on a target generated from this one with another topology (a sweep's).",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(sockets__gte=1, cores__gte=1, threads__gte=1),
                name="target_topology_positive",
            ),
            # A lab pool's machines are what they are: only a QEMU shape can be derived.
            # (That the base is no derived target itself is Target.clean's and the
            # service's: a check constraint sees one row.)
            models.CheckConstraint(
                condition=Q(base__isnull=True) | (Q(kind="qemu") & ~Q(base=F("id"))),
                name="target_derived_is_qemu",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    @property
    def queue(self) -> str:
        """The Celery queue whose workers run this target's benchmarks: a derived target's
        is its base's (the base's workers boot any topology; the run reads it from here)."""
        return bench_queue(self.base.name if self.base is not None else self.name)

    @property
    def is_lab(self) -> bool:
        return self.kind == self.Kind.LAB

    @property
    def is_derived(self) -> bool:
        return self.base_id is not None

    @property
    def active(self) -> bool:
        """Enabled, and for a derived target its base enabled too."""
        return self.enabled and (self.base is None or self.base.enabled)

    def clean(self) -> None:
        """What the admin refuses of a derived target (the service never makes one)."""
        super().clean()
        if self.base is None:
            return
        if why := derivation_refusal(self.base):
            raise ValidationError({"base": why})
        if self.base.pk == self.pk:
            raise ValidationError({"base": "a target is not derived from itself"})
        if self.pk is not None and self.derived.exists():
            raise ValidationError({"base": f"targets are derived from {self.name}: it is a base"})
        fields = ("kind", "arch", "machine")
        differ = [f for f in fields if getattr(self, f) != getattr(self.base, f)]
        if differ:
            raise ValidationError({"base": f"a derived target has its base's {', '.join(differ)}"})


def derivation_refusal(base: Target) -> str | None:
    """Why no target may be derived from `base`, or None."""
    if base.base_id is not None:
        return f"target {base.name} is itself derived (from {base.base}): derive from {base.base}"
    if base.is_lab:
        return (
            f"target {base.name} is a lab pool: its machines have the topology they have, "
            "none can be derived"
        )
    return None


# Targets a submission may use: enabled, and a derived one's base enabled too (Target.active).
ENABLED_TARGETS = Q(enabled=True) & (Q(base__isnull=True) | Q(base__enabled=True))
# Targets with a queue of their own, which the form and the API offer: none derived for sweeps.
NOT_DERIVED = Q(base__isnull=True)


class ComparisonState(models.TextChoices):
    QUEUED = "queued"
    BUILDING = "building"
    RUNNING = "running"
    ANALYSING = "analysing"
    DONE = "done"


def _new_seed() -> int:
    return secrets.randbits(62)


class Comparison(models.Model):
    """Kernel A (base) against kernel B (head): builds, interleaved runs, and the verdict."""

    class Trigger(models.TextChoices):
        WEB = "web"
        API = "api"
        CLI = "cli"
        WEBHOOK = "webhook"
        BISECTION = "bisection"  # a step of a bisection (webapp/bisections): never mailed
        MAIL = "mail"  # a mail command (webapp/alerts/inbound.py: rerun)
        SWEEP = "sweep"  # a point of a sweep (webapp/sweeps): its sweep mails, never it

    class Error(models.TextChoices):
        NONE = "", "(none)"
        BUILD_FAILED = "build-failed"
        RUNS_FAILED = "runs-failed"  # a side spent its failure budget (stats/failures.py)
        # Too few runs for the engine, or an engine error in every try of a look.
        ANALYSIS_FAILED = "analysis-failed"
        CANCELLED = "cancelled"

    class Visibility(models.TextChoices):
        PUBLIC = "public", "Public"
        RESTRICTED = "restricted", "Restricted to the tree's members"

    revision_a = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="+")
    revision_b = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="+")
    build_a = models.ForeignKey(
        Build, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    build_b = models.ForeignKey(
        Build, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    cmdline_a = models.TextField(blank=True, help_text="Extra kernel command line for side A.")
    cmdline_b = models.TextField(blank=True, help_text="Extra kernel command line for side B.")
    benchmarks = ArrayField(models.CharField(max_length=64))
    target = models.ForeignKey(Target, on_delete=models.PROTECT, related_name="comparisons")
    min_runs = models.PositiveSmallIntegerField(
        default=defaults.MIN_RUNS, help_text="Runs per side before the first look."
    )
    max_runs = models.PositiveSmallIntegerField(
        default=defaults.MAX_RUNS, help_text="Runs per side at most."
    )
    alpha = models.FloatField(
        default=defaults.ALPHA, validators=[MinValueValidator(0.0001), MaxValueValidator(0.5)]
    )
    threshold_pct = models.FloatField(
        default=defaults.THRESHOLD_PCT, help_text="Smallest change in % that counts as meaningful."
    )
    seed = models.BigIntegerField(default=_new_seed, help_text="Seed of the ABBA run order.")
    scheduled_per_side = models.PositiveSmallIntegerField(
        default=0, help_text="Runs per side scheduled so far (the next look's size)."
    )
    state = models.CharField(max_length=16, choices=ComparisonState, default=ComparisonState.QUEUED)
    result = models.CharField(max_length=16, choices=Result, default=Result.NONE, blank=True)
    error_code = models.CharField(max_length=32, choices=Error, default=Error.NONE, blank=True)
    error_message = models.TextField(blank=True)
    verdict = models.CharField(max_length=32, blank=True, help_text="Worst verdict over metrics.")
    trigger = models.CharField(max_length=16, choices=Trigger)
    requested_by = models.CharField(max_length=254, blank=True)
    submitted_by = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="comparisons",
        help_text="The account that submitted it (none: the operator's command line).",
    )
    visibility = models.CharField(
        max_length=16, choices=Visibility, default=Visibility.PUBLIC,
        help_text="Restricted: only the tree's members (and staff) see it, its runs and exports.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    analysis_sent_at = models.DateTimeField(
        null=True, blank=True, help_text="When its analysis task was last sent (re-sent if lost)."
    )
    analysis_started_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the look's analysis task started its try (none: not since it was sent).",
    )  # fmt: skip
    analysis_tries = models.PositiveSmallIntegerField(
        default=0, help_text="Tries of the look's analysis so far (RCUBENCH_ANALYSIS_TRIES)."
    )
    # A sweep's points (webapp/sweeps): comparisons of one cohort run each look's runs in
    # one interleaved schedule, so a look waits until every unfinished member asks for it.
    cohort = models.CharField(
        max_length=64, blank=True, db_index=True,
        help_text="Comparisons whose runs are scheduled together, look by look (a sweep's "
        "points); empty: on its own.",
    )  # fmt: skip
    waiting_runs = models.PositiveSmallIntegerField(
        default=0, help_text="Runs per side of its next look, held until its cohort is ready."
    )
    diagnosis_per_side = models.PositiveSmallIntegerField(
        default=0,
        help_text="Traced diagnostic runs per side and traceable benchmark, scheduled after "
        "the verdict (0: none asked for). They never enter a verdict.",
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The list page and the API list: newest first, a page at a time (LIMIT reads
            # the index in order instead of sorting every visible comparison).
            models.Index(fields=["-created_at", "-id"], name="comparison_newest_first"),
        ]
        constraints = [
            result_only_when_done("comparison_result_only_when_done", done=ComparisonState.DONE),
            error_code_iff_unsuccessful("comparison_error_code_iff_unsuccessful"),
            models.CheckConstraint(
                condition=Q(min_runs__gte=1) & Q(max_runs__gte=F("min_runs")),
                name="comparison_runs_bounds",
            ),
            models.CheckConstraint(
                condition=Q(alpha__gt=0) & Q(alpha__lt=1), name="comparison_alpha_range"
            ),
            models.CheckConstraint(
                condition=Q(threshold_pct__gte=0), name="comparison_threshold_nonnegative"
            ),
            models.CheckConstraint(condition=~Q(benchmarks=[]), name="comparison_has_benchmarks"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk}: {self.revision_a} vs {self.revision_b}"


# Comparisons that are a part of something larger, which reports them: never mailed, never
# a Regression of their own, never traced by policy.
PART_TRIGGERS = frozenset({Comparison.Trigger.BISECTION, Comparison.Trigger.SWEEP})


class Run(TrackedStep):
    """One boot of one side's kernel in a fresh VM, running one benchmark once."""

    class Side(models.TextChoices):
        A = "A"
        B = "B"

    class Error(models.TextChoices):
        # The VM runner's outcomes (engine/vm/runner.py), then the run service's own.
        NONE = "", "(none)"
        BOOT_FAILED = outcomes.BOOT_FAILED
        PANIC = outcomes.PANIC
        TIMEOUT = outcomes.TIMEOUT
        INFRA = outcomes.INFRA
        CONSOLE_OVERFLOW = outcomes.CONSOLE_OVERFLOW
        PARSE_FAILED = "parse-failed"
        LOST = "lost"
        CANCELLED = "cancelled"

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="runs")
    benchmark = models.CharField(max_length=64)
    side = models.CharField(max_length=1, choices=Side)
    index = models.PositiveIntegerField(help_text="0-based slot within its side and benchmark.")
    order = models.PositiveIntegerField(help_text="Position in the comparison's run schedule.")
    retry_of = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retried_by"
    )
    error_code = models.CharField(max_length=32, choices=Error, default=Error.NONE, blank=True)
    console_log = models.TextField(blank=True)
    # The RCU trace the kernel dumped on its console (benchmarks/rcutrace), taken off it:
    # console_log is what the benchmark's parser read. Empty: no events were traced.
    trace_log = models.TextField(blank=True)
    # The kernel's complaints in the whole console (engine/run/signatures.py: Scan.as_json),
    # scanned before it is clipped; null: not scanned (an older run, or no console).
    console_signatures = models.JSONField(null=True, blank=True)
    # A diagnostic run (docs/tracing.md): booted with the RCU tracepoints on, after the
    # verdict; its measurements give the perturbation line, never a verdict.
    traced = models.BooleanField(default=False)
    # The trace's parse (benchmarks.rcutrace.parser.digest); null: not traced, or no dump.
    trace_summary = models.JSONField(null=True, blank=True)
    wall_seconds = models.FloatField(null=True, blank=True, help_text="VM start to VM end.")
    ready_seconds = models.FloatField(
        null=True, blank=True, help_text="VM start to the guest's ready marker."
    )
    # What else the host did during the run (engine/run/hostload.py); null: not measured.
    host_busy_share = models.FloatField(
        null=True, blank=True,
        help_text="Other processes' CPU time / (run seconds x host CPUs), the run's QEMU excluded.",
    )  # fmt: skip
    host_steal_share = models.FloatField(
        null=True, blank=True, help_text="CPU time stolen from the host / (seconds x host CPUs)."
    )
    host_load_avg = models.FloatField(
        null=True, blank=True, help_text="The host's 1-minute load average at the run's end."
    )
    contended = models.BooleanField(
        null=True, blank=True,
        help_text="host_busy_share above RCUBENCH_CONTENTION_SHARE when the run ended.",
    )  # fmt: skip
    pinned = models.BooleanField(
        null=True, blank=True,
        help_text="The guest's vCPUs and emulator had host CPUs of their own (libvirt cputune).",
    )  # fmt: skip

    class Meta:
        ordering = ["comparison", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["comparison", "benchmark", "side", "index"], name="run_unique_slot"
            ),
            models.UniqueConstraint(fields=["comparison", "order"], name="run_unique_order"),
            result_only_when_done("run_result_only_when_done"),
            error_code_iff_unsuccessful("run_error_code_iff_unsuccessful"),
        ]
        indexes = [models.Index(fields=["state", "heartbeat_at"], name="run_state_heartbeat")]

    def __str__(self) -> str:
        return f"comparison {self.comparison_id} {self.benchmark} {self.side}{self.index}"


class Measurement(models.Model):
    """One metric of one run: its raw samples (many for latencies, one for a single value)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="measurements")
    benchmark = models.CharField(max_length=64)
    metric = models.CharField(max_length=64)
    unit = models.CharField(max_length=16)
    samples = ArrayField(models.FloatField())

    class Meta:
        ordering = ["run", "benchmark", "metric"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "benchmark", "metric"], name="measurement_unique_metric"
            ),
            models.CheckConstraint(condition=~Q(samples=[]), name="measurement_has_samples"),
        ]

    def __str__(self) -> str:
        return f"{self.run}: {self.benchmark}/{self.metric}"


class ServedQueue(models.Model):
    """A worker's heartbeat for a bench queue it consumes (workers/serving.py upserts it at
    every poll, with the database's clock): a target whose queue has no recent row has no
    worker, and submitting to it is refused (webapp/comparisons/serving.py)."""

    queue = models.CharField(max_length=80)
    worker = models.CharField(max_length=255, help_text="The worker's Celery hostname.")
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["queue", "worker"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "worker"], name="served_queue_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.queue} by {self.worker}"
