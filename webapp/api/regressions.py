"""The API's regressions: list, one with its history of states, and a move (the triage
buttons' service, webapp.regressions.services.transition, with via "api")."""

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api.auth import TokenScopes
from webapp.api.serializers import FiniteFloatField
from webapp.comparisons.reproducer import public_url
from webapp.regressions import services
from webapp.regressions.models import Regression, RegressionState, Transition


class TransitionSerializer(serializers.ModelSerializer[Transition]):
    by = serializers.CharField(source="by.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Transition
        fields = ["from_state", "to_state", "via", "by", "by_address", "message_id", "note", "at"]
        read_only_fields = fields


class RegressionSerializer(serializers.ModelSerializer[Regression]):
    tree = serializers.CharField(source="tree.name", read_only=True)
    target = serializers.CharField(source="target.name", read_only=True)
    comparison = serializers.IntegerField(source="comparison_id", read_only=True, allow_null=True)
    change_point = serializers.IntegerField(
        source="change_point_id", read_only=True, allow_null=True
    )
    duplicate_of = serializers.IntegerField(
        source="duplicate_of_id", read_only=True, allow_null=True
    )
    shift_pct = FiniteFloatField(allow_null=True)
    ci_low_pct = FiniteFloatField(allow_null=True)
    ci_high_pct = FiniteFloatField(allow_null=True)
    url = serializers.SerializerMethodField(help_text="The regression's page.")

    class Meta:
        model = Regression
        fields = ["id", "tree", "branch", "target", "comparison", "change_point", "benchmark",
                  "metric", "statistic", "shift_pct", "ci_low_pct", "ci_high_pct",
                  "threshold_pct", "baseline", "culprit", "state", "duplicate_of", "fixed_by",
                  "reason", "clean_pushes", "opened_at", "triaged_at", "closed_at",
                  "url"]  # fmt: skip
        read_only_fields = fields

    def get_url(self, r: Regression) -> str:
        return public_url() + reverse("regressions:regression", args=[r.pk])


class RegressionDetailSerializer(RegressionSerializer):
    transitions = TransitionSerializer(many=True, read_only=True)

    class Meta(RegressionSerializer.Meta):
        fields = [*RegressionSerializer.Meta.fields, "transitions"]
        read_only_fields = fields


class MoveSerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=RegressionState.choices)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000,
                                 help_text="Why; required for invalid (its reason).")  # fmt: skip
    fixed_by = serializers.CharField(required=False, allow_blank=True, default="", max_length=200,
                                     help_text="Required for fixed: a sha or subject.")  # fmt: skip
    duplicate_of = serializers.IntegerField(required=False, allow_null=True, default=None,
                                            help_text="Required for duplicate.")  # fmt: skip


def _one(request: Request, pk: int) -> Regression:
    found = services.visible_regressions(request.user).filter(pk=pk).first()
    if found is None:
        raise NotFound(f"no regression {pk} that you may see")
    return found


@extend_schema(
    tags=["regressions"],
    parameters=[
        OpenApiParameter("tree", OpenApiTypes.STR, description="A tree's name."),
        OpenApiParameter("state", OpenApiTypes.STR, enum=RegressionState.values),
    ],
)
class RegressionList(generics.ListAPIView[Regression]):
    """The regressions you may see (of comparisons you see, or change points of your
    audience), newest first."""

    serializer_class = RegressionSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[Regression]:
        qs = services.visible_regressions(self.request.user).select_related("tree", "target")
        if tree := self.request.query_params.get("tree"):
            qs = qs.filter(tree__name=tree)
        if state := self.request.query_params.get("state"):
            qs = qs.filter(state=state)
        return qs.order_by("-opened_at", "-pk")


@extend_schema(tags=["regressions"])
class RegressionDetail(generics.RetrieveAPIView[Regression]):
    """One regression with every move of its state (404 if you may not see it)."""

    serializer_class = RegressionDetailSerializer

    def get_object(self) -> Regression:
        return _one(self.request, self.kwargs["pk"])


@extend_schema(
    tags=["regressions"],
    request=MoveSerializer,
    responses={200: RegressionDetailSerializer, 400: OpenApiResponse(description="Refused: why.")},
)
class RegressionMove(APIView):
    """Move a regression's state (the page's triage buttons): the tree's admins and
    submitters and staff (a token: the submit scope). A refused move is a 400
    {"detail": why}, nothing stored."""

    permission_classes = [permissions.IsAuthenticated, TokenScopes]

    def post(self, request: Request, pk: int) -> Response:
        reg = _one(request, pk)
        form = MoveSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            services.transition(
                reg.pk, data["state"], services.Actor(via="api", user=request.user),
                note=data["note"], fixed_by=data["fixed_by"], duplicate_of=data["duplicate_of"],
            )  # fmt: skip
        except services.TransitionRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(RegressionDetailSerializer(_one(request, pk)).data)
