"""Representations of the API's objects, and the comparison request. Thin: the data comes
from webapp/api/services.py, the checks of a request from the submission service."""

import math
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from knox.models import AuthToken
from rest_framework import serializers

from stats import defaults
from stats.phases import PhaseRow, Share
from webapp.accounts.models import Scope
from webapp.analysis.models import MetricVerdict
from webapp.api import services
from webapp.comparisons.diagnosis import PHASES, BenchmarkDiagnosis, Perturbation, TracedRun
from webapp.comparisons.diagnosis import diagnosis as read_diagnosis
from webapp.comparisons.exports import finite
from webapp.comparisons.models import Comparison, Measurement, Run, Target
from webapp.comparisons.names import kernel_names
from webapp.comparisons.progress import progress
from webapp.comparisons.reproducer import public_url
from webapp.comparisons.summary import report_url, verdict_unit
from webapp.states import Arch
from webapp.trees import names
from webapp.trees.models import PatchSeries, Tree, TreeMembership


class FiniteFloatField(serializers.FloatField):
    """A float, or null where it is NaN or infinite (JSON has neither)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> float | None:
        if value is None:
            return None
        number = float(value)
        return number if math.isfinite(number) else None


# --- trees, targets, benchmarks -------------------------------------------------------


class TreeSerializer(serializers.ModelSerializer[Tree]):
    role = serializers.SerializerMethodField(help_text="Your role on the tree (null: none).")
    can_submit = serializers.SerializerMethodField(help_text="Whether you may submit to it.")

    class Meta:
        model = Tree
        fields = ["name", "description", "public", "created_at", "role", "can_submit"]

    @extend_schema_field(
        serializers.ChoiceField(choices=TreeMembership.Role.choices, allow_null=True)
    )
    def get_role(self, tree: Tree) -> str | None:
        return getattr(tree, "user_role", None)

    def get_can_submit(self, tree: Tree) -> bool:
        return services.can_submit(self.context["request"].user, tree)


class TargetSerializer(serializers.ModelSerializer[Target]):
    cpus = serializers.IntegerField(read_only=True)
    queue = serializers.CharField(read_only=True)

    class Meta:
        model = Target
        fields = ["name", "kind", "arch", "sockets", "cores", "threads", "cpus", "memory_mb",
                  "machine", "enabled", "description", "queue"]  # fmt: skip


class MetricSerializer(serializers.Serializer[services.MetricInfo]):
    name = serializers.CharField()
    unit = serializers.CharField()
    direction = serializers.ChoiceField(
        choices=["lower", "higher"], help_text="Which way is better."
    )
    kind = serializers.ChoiceField(
        choices=["samples", "value"], help_text="Many samples per run, or one value per run."
    )
    primary = serializers.BooleanField()
    threshold = serializers.FloatField(
        allow_null=True, help_text="Practical threshold: % (or absolute, in the unit)."
    )
    threshold_is_absolute = serializers.BooleanField()


class ParamSerializer(serializers.Serializer[services.ParamInfo]):
    name = serializers.CharField()
    value = serializers.CharField(allow_null=True)


class BenchmarkSerializer(serializers.Serializer[services.BenchmarkInfo]):
    name = serializers.CharField()
    description = serializers.CharField()
    archs = serializers.ListField(child=serializers.CharField())
    metrics = MetricSerializer(many=True)
    parameters = ParamSerializer(
        many=True, help_text="The kernel command-line parameters the benchmark sets."
    )
    kconfig = serializers.ListField(child=serializers.CharField())
    guest_command = serializers.CharField(allow_blank=True)
    notes = serializers.CharField(
        allow_blank=True, help_text="For a preset: why its parameters were reviewed."
    )
    preset_of = serializers.CharField(
        allow_null=True,
        help_text="For a preset (a reviewed rcuscale variant, a benchmark of its own): the "
        "benchmark it is a variant of; null for a benchmark of its own.",
    )  # fmt: skip
    preset = serializers.CharField(
        allow_null=True, help_text="For a preset: its name there (e.g. many-writers)."
    )
    preset_parameters = ParamSerializer(
        many=True, allow_null=True,
        help_text="For a preset: the kernel command-line parameters it sets over its base's.",
    )  # fmt: skip


# --- comparisons ----------------------------------------------------------------------


class SeriesSerializer(serializers.ModelSerializer[PatchSeries]):
    mbox_url = serializers.SerializerMethodField()

    class Meta:
        model = PatchSeries
        fields = ["id", "subject", "author", "message_id", "mbox_url"]

    def get_mbox_url(self, series: PatchSeries) -> str:
        return public_url() + reverse("reports:series-mbox", args=[series.pk])


class ProgressSerializer(serializers.Serializer[Any]):
    phase = serializers.CharField(help_text="building, running look N, analysing, done: ...")
    done = serializers.IntegerField(help_text="Runs that are data (ok).")
    total = serializers.IntegerField(help_text="Ok runs the next look needs (both sides).")
    failed = serializers.IntegerField(help_text="Runs that ended otherwise (not data).")
    detail = serializers.CharField(allow_blank=True)


# --- diagnosis (traced runs: docs/tracing.md) ------------------------------------------


class PhaseSerializer(serializers.Serializer[PhaseRow]):
    phase = serializers.CharField()
    label = serializers.SerializerMethodField()
    unit = serializers.SerializerMethodField(help_text='ms, scans, callbacks, or "share" (0-1).')
    n_a = serializers.IntegerField(help_text="Usable traced runs of A with this phase.")
    n_b = serializers.IntegerField()
    median_a = FiniteFloatField(help_text="Median over A's usable runs of each run's value.")
    median_b = FiniteFloatField()
    shift = FiniteFloatField(help_text="Hodges-Lehmann B - A, in the unit.")
    ci_low = FiniteFloatField(source="low", help_text="95% CI (inverted Brunner-Munzel).")
    ci_high = FiniteFloatField(source="high")
    p_value = FiniteFloatField(help_text="Brunner-Munzel permutation p.")
    q_value = FiniteFloatField(help_text="Benjamini-Hochberg across the phases.")
    flagged = serializers.BooleanField(help_text="q at most 0.05 and a CI excluding 0.")

    def get_label(self, row: PhaseRow) -> str:
        return PHASES.get(row.phase, (row.phase, ""))[0]

    def get_unit(self, row: PhaseRow) -> str:
        return PHASES.get(row.phase, ("", ""))[1]


class ShareSerializer(serializers.Serializer[Share]):
    part = serializers.CharField(help_text="gp_first_fqs_wait: the wait before the first scan.")
    whole = serializers.CharField(help_text="gp_duration: the grace period.")
    estimate = FiniteFloatField(help_text="The part's change over the whole's (1 = all of it).")
    low = FiniteFloatField(help_text="95% percentile CI from resampling whole runs.")
    high = FiniteFloatField()
    resamples = serializers.IntegerField()


class PerturbationSerializer(serializers.Serializer[Perturbation]):
    side = serializers.CharField()
    metric = serializers.CharField(help_text="The benchmark's primary metric.")
    unit = serializers.CharField()
    traced_p50 = FiniteFloatField(help_text="Median over traced ok runs of each run's p50.")
    untraced_p50 = FiniteFloatField(help_text="The same over the verdict's untraced runs.")
    traced_runs = serializers.IntegerField()
    untraced_runs = serializers.IntegerField()
    change = FiniteFloatField(help_text="traced / untraced - 1.")


class TracedRunSerializer(serializers.Serializer[TracedRun]):
    id = serializers.IntegerField()
    side = serializers.CharField()
    index = serializers.IntegerField()
    state = serializers.CharField()
    result = serializers.CharField(allow_blank=True)
    error_code = serializers.CharField(allow_blank=True)
    usable = serializers.BooleanField(help_text="Its trace gives phase values.")
    why_not = serializers.CharField(allow_blank=True, help_text='Why not usable ("" if it is).')
    paired_share = FiniteFloatField()
    loss = FiniteFloatField(help_text="Events or grace periods lost; above 0.01: not usable.")
    events = serializers.IntegerField(allow_null=True)
    lost_events = serializers.IntegerField(allow_null=True)
    grace_periods = serializers.IntegerField(allow_null=True, help_text="In rcuscale's window.")
    url = serializers.SerializerMethodField(help_text="The run in the API.")
    trace_url = serializers.SerializerMethodField(
        help_text="Its RCU trace in ftrace's text form (null: the run has none)."
    )

    def get_url(self, r: TracedRun) -> str:
        return public_url() + reverse("api:run-detail", args=[r.id])

    def get_trace_url(self, r: TracedRun) -> str | None:
        return public_url() + reverse("reports:run-trace", args=[r.id]) if r.traced else None


class BenchmarkDiagnosisSerializer(serializers.Serializer[BenchmarkDiagnosis]):
    benchmark = serializers.CharField()
    finished = serializers.SerializerMethodField(help_text="Traced runs ended (any result).")
    usable = serializers.DictField(
        child=serializers.IntegerField(), help_text="Per side (A, B): usable traced runs."
    )
    phases = PhaseSerializer(source="rows", many=True, help_text="A against B, per phase.")
    share = ShareSerializer(
        allow_null=True, help_text="The wait before the first FQS scan's share of the change "
        "in median grace-period duration; null unless that change is flagged.",
    )  # fmt: skip
    fqs_scans = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text='Per side: FQS scans in a grace period -> grace periods ({"A": {"1": 800}}).',
    )
    medians = serializers.DictField(
        child=serializers.DictField(child=FiniteFloatField()),
        help_text="Per side: each phase's median over the usable runs (the stacked bars).",
    )
    perturbation = PerturbationSerializer(many=True)
    runs = TracedRunSerializer(many=True)

    def get_finished(self, b: BenchmarkDiagnosis) -> int:
        return sum(r.state == "done" for r in b.runs)


class DiagnosisSerializer(serializers.Serializer[Any]):
    runs_per_side = serializers.IntegerField(help_text="Traced runs per side and benchmark.")
    unfinished = serializers.IntegerField(help_text="Traced runs queued or running.")
    running = serializers.BooleanField()
    report_url = serializers.CharField(help_text="The report's Why? section.")
    benchmarks = BenchmarkDiagnosisSerializer(many=True)


class ComparisonSerializer(serializers.ModelSerializer[Comparison]):
    tree = serializers.CharField(source="revision_a.tree.name", read_only=True)
    base_ref = serializers.CharField(source="revision_a.ref", read_only=True)
    head_ref = serializers.CharField(
        source="revision_b.ref", read_only=True, help_text="Side B's ref (the base with a series)."
    )
    series = SeriesSerializer(source="revision_b.series", read_only=True, allow_null=True)
    patch_fallback = serializers.BooleanField(source="revision_b.patch_fallback", read_only=True)
    sha_a = serializers.CharField(source="revision_a.sha", read_only=True)
    sha_b = serializers.CharField(source="revision_b.sha", read_only=True)
    subject_a = serializers.CharField(
        source="revision_a.subject", read_only=True,
        help_text="The subject line of side A's commit (empty until its ref is resolved).",
    )  # fmt: skip
    subject_b = serializers.CharField(source="revision_b.subject", read_only=True)
    branch = serializers.CharField(
        source="push_branch", read_only=True, allow_null=True, default=None,
        help_text="The branch of the push side B is the head of (webhook comparisons).",
    )  # fmt: skip
    name_a = serializers.SerializerMethodField(
        help_text='Side A as people name it: `tree/branch 12-digit-sha ("subject")`.'
    )
    name_b = serializers.SerializerMethodField(
        help_text="Side B likewise; a series: `... + N patches: <series subject>`."
    )
    target = serializers.CharField(source="target.name", read_only=True)
    submitter = serializers.CharField(
        source="submitted_by.username", read_only=True, allow_null=True, default=None
    )
    report_url = serializers.SerializerMethodField()

    class Meta:
        model = Comparison
        fields = ["id", "tree", "base_ref", "head_ref", "series", "patch_fallback", "sha_a",
                  "sha_b", "subject_a", "subject_b", "branch", "name_a", "name_b",
                  "cmdline_a", "cmdline_b", "benchmarks", "target", "min_runs", "max_runs",
                  "alpha", "threshold_pct", "seed", "scheduled_per_side", "state", "result",
                  "error_code", "error_message", "verdict", "visibility", "trigger",
                  "submitter", "created_at", "started_at", "finished_at",
                  "report_url"]  # fmt: skip
        read_only_fields = fields

    def get_report_url(self, c: Comparison) -> str:
        return report_url(c)

    def get_name_a(self, c: Comparison) -> str:
        return kernel_names(c)[0].text

    def get_name_b(self, c: Comparison) -> str:
        return kernel_names(c)[1].text


class ComparisonDetailSerializer(ComparisonSerializer):
    progress = serializers.SerializerMethodField()
    diagnosis = serializers.SerializerMethodField(
        help_text="What its traced diagnostic runs found (docs/tracing.md); they never enter "
        "a verdict. Null when none were asked for."
    )

    class Meta(ComparisonSerializer.Meta):
        fields = [*ComparisonSerializer.Meta.fields, "progress", "diagnosis"]
        read_only_fields = fields

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, c: Comparison) -> dict[str, Any]:
        return dict(ProgressSerializer(progress(c)).data)

    @extend_schema_field(DiagnosisSerializer(allow_null=True))
    def get_diagnosis(self, c: Comparison) -> dict[str, Any] | None:
        d = read_diagnosis(c)
        if d is None:
            return None
        return dict(DiagnosisSerializer({
            "runs_per_side": d.per_side, "unfinished": d.unfinished, "running": d.running,
            "report_url": f"{report_url(c)}#diagnosis", "benchmarks": d.benchmarks,
        }).data)  # fmt: skip


class DiagnoseRequestSerializer(serializers.Serializer[Any]):
    runs_per_side = serializers.IntegerField(
        required=False, allow_null=True, default=None,
        help_text="Traced runs per side of each traceable benchmark (default: the server's "
        "RCUBENCH_DIAGNOSIS_RUNS, 6; at most its runs per side).",
    )  # fmt: skip


class ComparisonRequestSerializer(serializers.Serializer[Any]):
    """The fields of the submission form: side B is a head ref, an uploaded mbox (series,
    multipart/form-data) or a lore message-id, or none (A/A, or two command lines)."""

    tree = serializers.CharField(
        max_length=names.MAX_LENGTH, validators=[names.validate_tree_name],
        help_text="A tree's name (GET /api/v1/trees/).",
    )  # fmt: skip
    base_ref = serializers.CharField(max_length=1024, help_text="Side A's ref.")
    head_ref = serializers.CharField(
        max_length=1024, required=False, default="", allow_blank=True,
        help_text="Side B's ref (or give a series, or neither: B is the base).",
    )  # fmt: skip
    series = serializers.FileField(
        required=False, allow_null=True, default=None, allow_empty_file=True,
        help_text="An mbox of a patch series (git format-patch / send-email), applied on the "
        "base (multipart/form-data).",
    )  # fmt: skip
    message_id = serializers.CharField(
        max_length=998, required=False, default="", allow_blank=True,
        help_text="The message-id of a series posted to a list, fetched from lore with b4.",
    )  # fmt: skip
    benchmarks = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=32, required=False,
        default=["sync-rcu-latency"],
        help_text="Benchmark names (GET /api/v1/benchmarks/); a preset, a reviewed rcuscale "
        "variant such as sync-rcu-latency--many-writers, is named as a benchmark.",
    )  # fmt: skip
    target = serializers.CharField(max_length=64, required=False, default="qemu-x86_64")
    arch = serializers.ChoiceField(
        choices=Arch.choices, required=False, default="", allow_blank=True,
        help_text="If given, the target must be of this arch.",
    )  # fmt: skip
    min_runs = serializers.IntegerField(
        required=False, default=defaults.MIN_RUNS, min_value=0, max_value=2**31,
        help_text="Runs per side at the first look.",
    )  # fmt: skip
    max_runs = serializers.IntegerField(
        required=False, default=defaults.MAX_RUNS, min_value=0, max_value=2**31,
        help_text="Runs per side at most.",
    )  # fmt: skip
    threshold_pct = serializers.FloatField(
        required=False, default=defaults.THRESHOLD_PCT,
        help_text="Smallest change in % that counts as meaningful.",
    )  # fmt: skip
    alpha = serializers.FloatField(required=False, default=defaults.ALPHA)
    cmdline_a = serializers.CharField(
        max_length=4096, required=False, default="", allow_blank=True, trim_whitespace=False,
        help_text="Extra kernel command line of side A (allow-listed parameters).",
    )  # fmt: skip
    cmdline_b = serializers.CharField(
        max_length=4096, required=False, default="", allow_blank=True, trim_whitespace=False,
        help_text="Extra kernel command line of side B.",
    )  # fmt: skip
    patch_fallback = serializers.BooleanField(
        required=False, default=False,
        help_text="If the series does not apply with git am: git am -3, then patch -F3 (fuzz).",
    )  # fmt: skip
    visibility = serializers.ChoiceField(
        choices=Comparison.Visibility.choices, required=False, default="", allow_blank=True,
        help_text="Default: public on a public tree, restricted otherwise.",
    )  # fmt: skip
    seed = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=2**62 - 1,
        help_text="Seed of the ABBA run order (default: a fresh random one).",
    )  # fmt: skip

    def validate_series(self, upload: Any) -> Any:
        limit = settings.RCUBENCH_MAX_MBOX_BYTES
        if upload is not None and upload.size > limit:
            raise serializers.ValidationError(
                f"the mbox is {upload.size} bytes; the limit is {limit}"
            )
        return upload


# --- runs, measurements, verdicts -----------------------------------------------------


class RunSerializer(serializers.ModelSerializer[Run]):
    comparison = serializers.IntegerField(source="comparison_id", read_only=True)
    retry_of = serializers.IntegerField(source="retry_of_id", read_only=True, allow_null=True)
    wall_seconds = FiniteFloatField()
    ready_seconds = FiniteFloatField()
    host_busy_share = FiniteFloatField()
    host_steal_share = FiniteFloatField()
    host_load_avg = FiniteFloatField()
    traced = serializers.BooleanField(
        read_only=True, help_text="A traced diagnostic run (after the verdict, RCU tracepoints "
        "on): never data, never in a verdict or the reliability test.",
    )  # fmt: skip
    console_url = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "comparison", "benchmark", "side", "index", "order", "retry_of",
                  "state", "result", "error_code", "error_message", "host", "wall_seconds",
                  "ready_seconds", "host_busy_share", "host_steal_share", "host_load_avg",
                  "contended", "pinned", "traced", "created_at", "started_at",
                  "finished_at", "console_url"]  # fmt: skip
        read_only_fields = fields

    def get_console_url(self, run: Run) -> str:
        return public_url() + reverse("reports:run-console", args=[run.pk])


class MeasurementSerializer(serializers.ModelSerializer[Measurement]):
    run = serializers.IntegerField(source="run_id", read_only=True)
    samples = serializers.ListField(child=FiniteFloatField(), read_only=True)

    class Meta:
        model = Measurement
        fields = ["id", "run", "benchmark", "metric", "unit", "samples"]
        read_only_fields = fields


class VerdictSerializer(serializers.ModelSerializer[MetricVerdict]):
    comparison = serializers.IntegerField(source="comparison_id", read_only=True)
    unit = serializers.SerializerMethodField()
    details = serializers.SerializerMethodField()

    class Meta:
        model = MetricVerdict
        fields = ["id", "comparison", "benchmark", "metric", "unit", "statistic", "is_primary",
                  "look", "n_a", "n_b", "median_a", "median_b", "shift_pct", "ci_low_pct",
                  "ci_high_pct", "p_value", "p_adjusted", "p_mannwhitney", "p_median",
                  "prob_b_gt_a", "cliffs_delta", "verdict", "warnings", "details",
                  "created_at"]  # fmt: skip
        read_only_fields = fields

    def build_standard_field(self, field_name: str, model_field: Any) -> Any:
        cls, kwargs = super().build_standard_field(field_name, model_field)
        if cls is serializers.FloatField:
            return FiniteFloatField, {"read_only": True, "allow_null": True}
        return cls, kwargs

    def get_unit(self, v: MetricVerdict) -> str:
        return verdict_unit(v)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_details(self, v: MetricVerdict) -> Any:
        return finite(v.details)


# --- tokens ---------------------------------------------------------------------------


class TokenSerializer(serializers.ModelSerializer[AuthToken]):
    token_key = serializers.CharField(read_only=True, help_text="The token's first characters.")
    scopes = serializers.SerializerMethodField(
        help_text="What the token may do: read (GET), submit (submit and cancel comparisons)."
    )

    class Meta:
        model = AuthToken
        fields = ["token_key", "scopes", "created", "expiry"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.ChoiceField(Scope.choices)))
    def get_scopes(self, obj: AuthToken) -> list[str]:
        grant = getattr(obj, "grant", None)  # tokens() joins it; none: read only
        return list(grant.scopes) if grant is not None else [Scope.READ]


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(
        read_only=True, help_text="The token: shown this once (only its hash is stored)."
    )

    class Meta(TokenSerializer.Meta):
        fields = ["token", "token_key", "scopes", "created", "expiry"]
        read_only_fields = fields


class TokenRequestSerializer(serializers.Serializer[Any]):
    scopes = serializers.ListField(
        child=serializers.CharField(max_length=16),
        required=False,
        max_length=8,
        default=list,
        help_text="read (always granted) and optionally submit; default: read only.",
    )

    def validate_scopes(self, value: list[str]) -> list[str]:
        try:
            return services.normalize_scopes(value)
        except services.UnknownScope as exc:
            raise serializers.ValidationError(str(exc)) from None


class RevokedSerializer(serializers.Serializer[Any]):
    revoked = serializers.IntegerField(help_text="How many tokens were revoked.")
