"""The API's representations of bisections and attributions, and the request that starts
one (webapp/bisections/: the service and the read model they come from)."""

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp.api.serializers import FiniteFloatField
from webapp.bisections import summary as bisection_summary
from webapp.bisections.models import Bisection, Step
from webapp.comparisons.reproducer import public_url


class BisectionSerializer(serializers.ModelSerializer[Bisection]):
    comparison = serializers.IntegerField(
        source="comparison_id", read_only=True, help_text="The original comparison."
    )
    positions = serializers.IntegerField(
        source="n", read_only=True, help_text="Commits of the range, or patches of the series."
    )
    effect = FiniteFloatField(help_text="The original's shift of the statistic, in `unit`.")
    effect_low = FiniteFloatField()
    effect_high = FiniteFloatField()
    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )
    url = serializers.SerializerMethodField(help_text="The bisection's page.")

    class Meta:
        model = Bisection
        fields = ["id", "comparison", "mode", "kind", "benchmark", "metric", "statistic", "unit",
                  "effect", "effect_low", "effect_high", "original_verdict", "positions",
                  "state", "result", "error_code", "error_message", "outcome", "first", "last",
                  "summary", "trigger", "requested_by", "created_at", "started_at",
                  "finished_at", "url"]  # fmt: skip
        read_only_fields = fields

    def get_url(self, b: Bisection) -> str:
        return bisection_summary.url(b)


class StepSerializer(serializers.ModelSerializer[Step]):
    comparison = serializers.IntegerField(
        source="comparison_id", read_only=True, allow_null=True,
        help_text="The step's comparison (null: it could not be submitted, or was deleted).",
    )  # fmt: skip
    comparison_state = serializers.CharField(
        source="comparison.state", read_only=True, allow_null=True, default=None
    )
    comparison_url = serializers.SerializerMethodField()
    shift = FiniteFloatField(help_text="The step's shift of the statistic, in the unit.")
    ci_low = FiniteFloatField()
    ci_high = FiniteFloatField()

    class Meta:
        model = Step
        fields = ["id", "kind", "position", "comparison", "comparison_state", "comparison_url",
                  "answer", "reason", "shift", "ci_low", "ci_high", "extended", "created_at",
                  "answered_at"]  # fmt: skip
        read_only_fields = fields

    def get_comparison_url(self, step: Step) -> str | None:
        if step.comparison_id is None:
            return None
        return public_url() + reverse("reports:comparison", args=[step.comparison_id])


class PositionSerializer(serializers.Serializer[bisection_summary.Position]):
    position = serializers.IntegerField()
    label = serializers.CharField(help_text='A 12-digit sha, or "patch k/n".')
    sha = serializers.CharField(allow_blank=True, help_text='"" for a patch of a series.')
    subject = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)
    link = serializers.CharField(allow_blank=True, help_text="A patch's message-id.")
    culprit = serializers.BooleanField()
    in_range = serializers.BooleanField(help_text="Within the range (or culprit) found.")


class BarSerializer(serializers.Serializer[Any]):
    position = serializers.IntegerField()
    start = serializers.FloatField(help_text="The sum of the effects before this patch.")
    shift = FiniteFloatField(source="effect.shift", default=None)
    ci_low = FiniteFloatField(source="effect.ci_low", default=None)
    ci_high = FiniteFloatField(source="effect.ci_high", default=None)
    beyond_threshold = serializers.BooleanField()
    excludes_zero = serializers.BooleanField()


class BisectionDetailSerializer(BisectionSerializer):
    """With what the bisection's page shows: the positions, every step, an attribution's
    waterfall (the threshold its bars are held to)."""

    steps_needed = serializers.SerializerMethodField(
        help_text="At most this many steps (a bisection's, before the two that confirm)."
    )
    commits = serializers.SerializerMethodField()
    steps = serializers.SerializerMethodField()
    waterfall = serializers.SerializerMethodField(
        help_text="An attribution's bars, one per patch in order; [] for a bisection."
    )
    threshold = serializers.SerializerMethodField(
        help_text="The waterfall's +-line (an effect in %: the comparison's threshold)."
    )

    class Meta(BisectionSerializer.Meta):
        fields = [*BisectionSerializer.Meta.fields, "steps_needed", "commits", "steps",
                  "waterfall", "threshold"]  # fmt: skip
        read_only_fields = fields

    def _summary(self, b: Bisection) -> bisection_summary.BisectionSummary:
        cache = self.context.setdefault("bisection_summaries", {})
        if b.pk not in cache:
            cache[b.pk] = bisection_summary.summarize(b)
        return cache[b.pk]

    def get_steps_needed(self, b: Bisection) -> int:
        return self._summary(b).steps_needed

    @extend_schema_field(PositionSerializer(many=True))
    def get_commits(self, b: Bisection) -> list[dict[str, Any]]:
        return list(PositionSerializer(self._summary(b).positions, many=True).data)

    @extend_schema_field(StepSerializer(many=True))
    def get_steps(self, b: Bisection) -> list[dict[str, Any]]:
        return list(StepSerializer(self._summary(b).steps, many=True).data)

    @extend_schema_field(BarSerializer(many=True))
    def get_waterfall(self, b: Bisection) -> list[dict[str, Any]]:
        return list(BarSerializer(self._summary(b).bars, many=True).data)

    def get_threshold(self, b: Bisection) -> float:
        return self._summary(b).threshold


class BisectRequestSerializer(serializers.Serializer[Any]):
    """What to bisect: the mode, and the statistic (all three of benchmark, metric and
    statistic, or none: the first primary metric that regressed or improved)."""

    mode = serializers.ChoiceField(
        choices=Bisection.Mode.choices, required=False, default=Bisection.Mode.BISECT,
        help_text="bisect: find the commit (or patch); attribute: measure every patch of a "
        "series against its parent.",
    )  # fmt: skip
    benchmark = serializers.CharField(max_length=64, required=False, default="")
    metric = serializers.CharField(max_length=64, required=False, default="")
    statistic = serializers.CharField(max_length=16, required=False, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        named = [attrs[k] for k in ("benchmark", "metric", "statistic")]
        if any(named) and not all(named):
            raise serializers.ValidationError(
                "give the benchmark, the metric and the statistic, or none of them"
            )
        return attrs
