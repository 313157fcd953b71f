"""The API's sweeps: submit one (a comparison's fields plus the axis), list, one with its
points and verdicts (webapp/sweeps/summary.py, the read model the page and the CLI share),
and cancel."""

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api import services as api_services
from webapp.api.auth import TokenScopes
from webapp.api.serializers import ComparisonRequestSerializer
from webapp.api.views import lore_series as _lore
from webapp.comparisons.reproducer import public_url
from webapp.comparisons.submission import SubmissionError
from webapp.sweeps import services
from webapp.sweeps.models import Sweep
from webapp.sweeps.summary import summary


class SweepRequestSerializer(ComparisonRequestSerializer):
    """A comparison's fields (its target is the sweep's base target) and the axis. JSON;
    a series by lore message-id (multipart uploads are the comparison endpoint's)."""

    axis = serializers.ChoiceField(choices=Sweep.Axis.choices)
    values = serializers.ListField(
        child=serializers.CharField(max_length=64), min_length=2, max_length=32,
        help_text='The axis\' values: topologies ("SxCxT", or a vCPU count keeping the base '
        "target's sockets and threads per core), the boot parameter's values, or the variant "
        "parameter's (whole numbers within its reviewed bounds).",
    )  # fmt: skip
    parameter = serializers.CharField(
        max_length=128, required=False, default="", allow_blank=True,
        help_text="The boot parameter swept (axis cmdline), set on both sides at each point; "
        "or the benchmark's own parameter (axis variant: e.g. rcuscale.nwriters, each point "
        "runs the benchmark's variant, '<benchmark>--nwriters-4', on both sides).",
    )  # fmt: skip
    log_axis = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="Slopes on log-log scales (the growth exponent). Default: for a topology "
        "or a variant parameter that is a count.",
    )  # fmt: skip


class PointSerializer(serializers.Serializer[Any]):
    position = serializers.IntegerField()
    value = serializers.CharField()
    x = serializers.FloatField(allow_null=True)
    comparison = serializers.IntegerField(source="comparison_id")
    target = serializers.CharField()
    benchmark = serializers.CharField(help_text="The point's benchmark (variant axis: its own).")
    state = serializers.CharField()
    verdict = serializers.CharField(help_text="The primary's verdict after Holm across points.")
    shift_pct = serializers.FloatField(allow_null=True)
    ci_low_pct = serializers.FloatField(allow_null=True)
    ci_high_pct = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(allow_null=True)
    p_holm = serializers.FloatField(allow_null=True)
    runs_a = serializers.ListField(child=serializers.FloatField())
    runs_b = serializers.ListField(child=serializers.FloatField())
    note = serializers.CharField()


class SweepSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="pk")
    axis = serializers.CharField()
    parameter = serializers.CharField()
    values = serializers.ListField(child=serializers.CharField())
    log_axis = serializers.BooleanField()
    benchmark = serializers.CharField()
    metric = serializers.CharField()
    statistic = serializers.CharField()
    unit = serializers.CharField()
    base_target = serializers.CharField()
    state = serializers.CharField(help_text="running, or done once every point has ended.")
    verdict = serializers.CharField(help_text="scales-worse, scales-better, same, inconclusive.")
    interaction_verdict = serializers.CharField(help_text="For two points: the 2 x 2's.")
    result = serializers.JSONField(help_text="Both slopes, the ratio and interaction, with CIs.")
    error = serializers.CharField()
    sentence = serializers.CharField()
    points = PointSerializer(many=True)
    finished_points = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.SerializerMethodField(help_text="The sweep's page.")

    def get_url(self, s: Any) -> str:
        return public_url() + reverse("reports:sweep", args=[s.pk])


def _request(user: Any, fields: dict[str, Any]) -> services.SweepRequest:
    mbox = _lore(fields["message_id"].strip()) if fields["message_id"].strip() else None
    pair = api_services.comparison_request(user, fields, mbox)
    return services.SweepRequest(
        pair=pair, axis=fields["axis"], values=tuple(fields["values"]),
        parameter=fields["parameter"], log_axis=fields["log_axis"],
    )  # fmt: skip


@extend_schema(tags=["sweeps"])
class SweepList(generics.ListAPIView[Sweep]):
    """Sweeps you may see, newest first; POST submits one."""

    permission_classes = [permissions.IsAuthenticatedOrReadOnly, TokenScopes]
    serializer_class = SweepSerializer

    @property
    def throttle_scope(self) -> str | None:  # read by ScopedThrottle
        return "submit" if self.request.method == "POST" else None

    def get_queryset(self) -> QuerySet[Sweep]:
        return services.visible_sweeps(self.request.user).order_by("-created_at", "-pk")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # noqa: S101 - the view always paginates
        return self.get_paginated_response(SweepSerializer([summary(s) for s in page],
                                                           many=True).data)  # fmt: skip

    @extend_schema(
        request=SweepRequestSerializer, responses={201: SweepSerializer},
        description="Submit a sweep: one A/B pair at every value of an axis. A refused "
        "request is a 400 naming the field at fault; nothing of it is stored.",
    )  # fmt: skip
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = SweepRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        fields = form.validated_data
        if fields["series"] is not None:
            raise ValidationError({"series": ["a sweep takes a series by message_id"]})
        try:
            api_services.check_submitter(request.user, fields["tree"])
            sweep = services.submit_sweep(_request(request.user, fields))
        except SubmissionError as exc:
            raise ValidationError(exc.as_dict()) from None
        location = request.build_absolute_uri(reverse("api:sweep-detail", args=[sweep.pk]))
        return Response(SweepSerializer(summary(sweep)).data, status=status.HTTP_201_CREATED,
                        headers={"Location": location})  # fmt: skip


@extend_schema(tags=["sweeps"])
class SweepDetail(APIView):
    """One sweep with its points and verdicts (404 if you may not see it)."""

    permission_classes = [permissions.IsAuthenticatedOrReadOnly, TokenScopes]

    @extend_schema(responses=SweepSerializer)
    def get(self, request: Request, pk: int) -> Response:
        sweep = services.visible_sweeps(request.user).filter(pk=pk).first()
        if sweep is None:
            raise NotFound(f"no sweep {pk}")
        return Response(SweepSerializer(summary(sweep)).data)


@extend_schema(tags=["sweeps"])
class SweepCancel(APIView):
    """Cancel a sweep's unfinished points (its comparisons' cancellers: staff, the tree's
    admins, the submitter)."""

    permission_classes = [permissions.IsAuthenticated, TokenScopes]

    @extend_schema(request=None, responses=SweepSerializer)
    def post(self, request: Request, pk: int) -> Response:
        try:
            sweep = services.cancel_for(request.user, pk)
        except Sweep.DoesNotExist:
            raise NotFound(f"no sweep {pk}") from None
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from None
        return Response(SweepSerializer(summary(sweep)).data)
