"""The REST API's views: thin, each asks webapp/api/services.py (and through it
webapp.access and the submission service) and serializes the answer."""

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, permissions, renderers, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.analysis.models import MetricVerdict
from webapp.api import bisection_serializers as bs
from webapp.api import serializers as s
from webapp.api import services
from webapp.api.auth import ManagedBySession, TokenAuthentication, TokenScopes
from webapp.api.errors import PayloadTooLarge
from webapp.api.filters import ComparisonFilter
from webapp.api.pagination import MeasurementPagination
from webapp.bisections.models import Bisection
from webapp.comparisons import exports, orchestrator
from webapp.comparisons.models import Comparison, Measurement, Run, Target
from webapp.comparisons.submission import SubmissionError
from webapp.trees import lore
from webapp.trees.models import Tree

# Multipart overhead allowed on top of the largest mbox (boundaries, the other fields).
FORM_SLACK_BYTES = 64 * 1024


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@permission_classes([permissions.AllowAny])
def not_found(request: Request) -> Response:
    raise NotFound("no such endpoint: see /api/schema/")


# --- trees, targets, benchmarks -------------------------------------------------------


@extend_schema(tags=["trees"])
class TreeList(generics.ListAPIView[Tree]):
    """The trees you may see (public ones, and those you are a member of), with your role
    on each."""

    serializer_class = s.TreeSerializer

    def get_queryset(self) -> QuerySet[Tree]:
        return services.trees(self.request.user)


@extend_schema(tags=["trees"])
class TreeDetail(generics.RetrieveAPIView[Tree]):
    """One tree, by name, with your role on it (404 if you may not see it, as for an
    unknown name)."""

    serializer_class = s.TreeSerializer
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[Tree]:
        return services.trees(self.request.user)


@extend_schema(tags=["targets"])
class TargetList(generics.ListAPIView[Target]):
    """Where runs execute: QEMU machine shapes and lab pools."""

    serializer_class = s.TargetSerializer

    def get_queryset(self) -> QuerySet[Target]:
        return services.targets()


@extend_schema(tags=["benchmarks"])
class BenchmarkList(generics.ListAPIView[Any]):
    """Every benchmark: its metrics (unit, which direction is better, the primary one) and
    the parameters it boots with."""

    serializer_class = s.BenchmarkSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return services.benchmarks()


# --- comparisons ----------------------------------------------------------------------


class ComparisonList(generics.ListCreateAPIView[Comparison]):
    """The comparisons you may see, newest first (filters as on the list page); POST submits
    one (JSON, or multipart/form-data with an mbox as `series`)."""

    filterset_class = ComparisonFilter

    @property
    def throttle_scope(self) -> str | None:  # read by ScopedThrottle
        return "submit" if self.request.method == "POST" else None

    def get_queryset(self) -> QuerySet[Comparison]:
        return services.comparison_list(self.request.user)

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        return (
            s.ComparisonRequestSerializer
            if self.request.method == "POST"
            else s.ComparisonSerializer
        )

    @extend_schema(tags=["comparisons"])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # The page is paginated by id (count and ids: no joins), its rows come through the
        # services' per-row memo (webapp/api/services.py, comparison_rows).
        visible = self.filter_queryset(self.get_queryset())
        pks = self.paginate_queryset(visible.values_list("pk", flat=True))
        assert pks is not None  # noqa: S101 - the view always paginates
        rows = services.comparison_rows(list(pks), visible, s.ComparisonSerializer,
                                        self.get_serializer_context())  # fmt: skip
        return self.get_paginated_response(rows)

    @extend_schema(
        tags=["comparisons"],
        description="Submit a comparison: the submission form's fields, as JSON or as "
        "multipart/form-data with the mbox of a patch series as `series`. A refused request "
        "is a 400 naming each field at fault with the submission service's message.",
        request={
            "application/json": s.ComparisonRequestSerializer,
            "multipart/form-data": s.ComparisonRequestSerializer,
        },
        responses={201: s.ComparisonDetailSerializer},
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        limit = settings.RCUBENCH_MAX_MBOX_BYTES
        length = _content_length(request)
        if length > limit + FORM_SLACK_BYTES:
            # Refused before the body is read (no temporary file of it).
            raise PayloadTooLarge(
                {"series": [f"the request is {length} bytes; an mbox may be at most {limit}"]}
            )
        form = s.ComparisonRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        fields = form.validated_data
        try:
            # The role first: a lore fetch (b4, up to lore.FETCH_TIMEOUT) holds a web worker.
            services.check_submitter(request.user, fields["tree"])
        except SubmissionError as exc:
            raise ValidationError(exc.as_dict()) from None
        mbox = _mbox(fields)
        try:
            c = services.submit(request.user, fields, mbox)
        except SubmissionError as exc:
            errors = exc.as_dict()
            if exc.field == "series" and fields["message_id"].strip():
                errors = {"message_id": errors["series"]}  # the series lore sent
            raise ValidationError(errors) from None
        body = s.ComparisonDetailSerializer(services.comparison(request.user, c.pk)).data
        location = request.build_absolute_uri(reverse("api:comparison-detail", args=[c.pk]))
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})


def _content_length(request: Request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _mbox(fields: dict[str, Any]) -> bytes | None:
    """Side B's series: the uploaded mbox, or the one lore has for the message-id."""
    upload, message_id = fields["series"], fields["message_id"].strip()
    if upload is not None and message_id:
        raise ValidationError({"message_id": ["give an mbox or a message-id, not both"]})
    if upload is not None:
        return bytes(upload.read())
    if message_id:
        if fields["head_ref"]:
            raise ValidationError({"head_ref": ["give a head ref or a patch series, not both"]})
        return lore_series(message_id)
    return None


def lore_series(message_id: str) -> bytes:
    """The series from lore (b4, in the request: it waits up to lore.FETCH_TIMEOUT)."""
    try:
        return lore.fetch(message_id)
    except lore.LoreFetchError as exc:
        raise ValidationError({"message_id": [str(exc)]}) from None


@extend_schema(tags=["comparisons"])
class ComparisonDetail(generics.RetrieveAPIView[Comparison]):
    """One comparison with its progress (404 if you may not see it)."""

    serializer_class = s.ComparisonDetailSerializer

    def get_object(self) -> Comparison:
        return services.comparison(self.request.user, self.kwargs["pk"])


@extend_schema(
    tags=["comparisons"],
    request=None,
    responses={
        200: s.ComparisonDetailSerializer,
        409: OpenApiResponse(description="The comparison had already ended."),
    },
)
class ComparisonCancel(APIView):
    """Cancel a comparison that has not ended: its submitter, the tree's admins and staff
    may (403 for others who see it, 404 for those who do not)."""

    permission_classes = [permissions.IsAuthenticated, TokenScopes]

    def post(self, request: Request, pk: int) -> Response:
        # 404 / PermissionDenied (403) as on the page; then the state after, for the reply.
        _, ended = orchestrator.cancel_for(request.user, pk, via="through the API")
        c = services.comparison(request.user, pk)
        if not ended:
            return Response(
                {"detail": f"comparison {c.pk} had already ended ({c.result})"},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(s.ComparisonDetailSerializer(c).data)


@extend_schema(
    tags=["comparisons"],
    description="Trace both kernels: schedule traced diagnostic runs (RCU tracepoints on) "
    "of each traceable benchmark of a comparison that ended ok, `runs_per_side` each "
    "(default RCUBENCH_DIAGNOSIS_RUNS). They never enter a verdict; the comparison's "
    "`diagnosis` says what they found (docs/tracing.md). Who may cancel it may (403 for "
    "others who see it, 404 for those who do not; a token needs the submit scope). 202 with "
    'the comparison, its traced runs queued; a refusal is a 400 {"detail": why} (not ended '
    "ok, nothing traceable, already asked for, a count out of range).",
    request=s.DiagnoseRequestSerializer,
    responses={202: s.ComparisonDetailSerializer},
)
class ComparisonDiagnose(APIView):
    permission_classes = [permissions.IsAuthenticated, TokenScopes]

    def post(self, request: Request, pk: int) -> Response:
        form = s.DiagnoseRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            services.diagnose(request.user, pk, form.validated_data["runs_per_side"])
        except services.DiagnosisRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        c = services.comparison(request.user, pk)
        location = request.build_absolute_uri(reverse("api:comparison-detail", args=[c.pk]))
        return Response(s.ComparisonDetailSerializer(c).data, status=status.HTTP_202_ACCEPTED,
                        headers={"Location": location})  # fmt: skip


@extend_schema(tags=["runs"])
class ComparisonRuns(generics.ListAPIView[Run]):
    """A comparison's runs, in run order (every attempt: failed ones are not data, nor traced
    diagnostic ones)."""

    serializer_class = s.RunSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[Run]:
        return services.runs(self.request.user, self.kwargs["pk"])


@extend_schema(tags=["runs"])
class RunDetail(generics.RetrieveAPIView[Run]):
    serializer_class = s.RunSerializer

    def get_object(self) -> Run:
        return services.run(self.request.user, self.kwargs["pk"])


@extend_schema(tags=["runs"])
class RunMeasurements(generics.ListAPIView[Measurement]):
    """A run's metrics with their raw samples."""

    serializer_class = s.MeasurementSerializer
    pagination_class = MeasurementPagination
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[Measurement]:
        return services.measurements(self.request.user, self.kwargs["pk"])


@extend_schema(tags=["comparisons"])
class ComparisonVerdicts(generics.ListAPIView[MetricVerdict]):
    """A comparison's verdict per metric and statistic, with the estimates behind it."""

    serializer_class = s.VerdictSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[MetricVerdict]:
        return services.verdicts(self.request.user, self.kwargs["pk"])


# --- bisections -----------------------------------------------------------------------


@extend_schema(tags=["bisections"])
class BisectionList(generics.ListAPIView[Bisection]):
    """The bisections and attributions you may see (those of comparisons you see), newest
    first."""

    serializer_class = bs.BisectionSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[Bisection]:
        return services.bisections(self.request.user)


@extend_schema(tags=["bisections"])
class BisectionDetail(generics.RetrieveAPIView[Bisection]):
    """One bisection with its commits (or patches), every step and an attribution's
    waterfall: what its page shows (404 if you may not see its comparison)."""

    serializer_class = bs.BisectionDetailSerializer

    def get_object(self) -> Bisection:
        return services.bisection(self.request.user, self.kwargs["pk"])


@extend_schema(
    tags=["bisections"],
    description="Bisect a statistic of a finished comparison, or attribute it to each "
    "patch of its series (mode attribute). Needs the submitter role on the comparison's "
    "tree (a token: the submit scope). 201 with the new bisection; 200 with the one "
    "already running for the same comparison, statistic and mode (the request joined it); "
    'a refusal is a 400 {"detail": why} (nothing to bisect, too noisy, no commits...).',
    request=bs.BisectRequestSerializer,
    responses={201: bs.BisectionDetailSerializer, 200: bs.BisectionDetailSerializer},
)
class ComparisonBisect(APIView):
    permission_classes = [permissions.IsAuthenticated, TokenScopes]
    throttle_scope = "submit"  # each step is a comparison

    def post(self, request: Request, pk: int) -> Response:
        form = bs.BisectRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            b, created = services.start_bisection(request.user, pk, form.validated_data)
        except services.BisectionRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        body = bs.BisectionDetailSerializer(services.bisection(request.user, b.pk)).data
        if not created:
            return Response(body)
        location = request.build_absolute_uri(reverse("api:bisection-detail", args=[b.pk]))
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})


@extend_schema(
    tags=["bisections"],
    request=None,
    responses={
        200: bs.BisectionDetailSerializer,
        409: OpenApiResponse(description="The bisection had already ended."),
    },
)
class BisectionCancel(APIView):
    """Cancel a bisection that has not ended, and its unfinished step comparisons: who
    asked for it, the comparison's submitter, the tree's admins and staff may (403 for
    others who see it, 404 for those who do not)."""

    permission_classes = [permissions.IsAuthenticated, TokenScopes]

    def post(self, request: Request, pk: int) -> Response:
        _, ended = services.cancel_bisection(request.user, pk)
        b = services.bisection(request.user, pk)
        if not ended:
            return Response(
                {"detail": f"bisection {b.pk} had already ended ({b.result})"},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(bs.BisectionDetailSerializer(b).data)


# --- exports --------------------------------------------------------------------------


class _Download(APIView):
    """A streamed file whatever the client accepts; its errors are JSON, as documented."""

    renderer_classes = [renderers.JSONRenderer]

    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[renderers.BaseRenderer, str]:
        return renderers.JSONRenderer(), "application/json"


@extend_schema(tags=["exports"], responses={(200, "text/csv"): OpenApiTypes.STR})
class ComparisonCSV(_Download):
    """Every run's raw samples as CSV, streamed (the report page's data.csv)."""

    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        c = services.comparison(request.user, pk)
        response = StreamingHttpResponse(exports.csv_chunks(c), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="comparison-{c.pk}.csv"'
        return response


@extend_schema(
    tags=["exports"],
    parameters=[OpenApiParameter(
        "samples", OpenApiTypes.BOOL, default=True,
        description="false: the summary alone, without the raw samples (what `compare "
                    "--server URL --format json` reads)",
    )],
    responses={(200, "application/json"): OpenApiResponse(OpenApiTypes.OBJECT)},
)  # fmt: skip
class ComparisonJSON(_Download):
    """The comparison as one JSON object (header, verdicts, reliability, reproducer and the
    raw samples as columns and rows), streamed (the report page's data.json)."""

    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        c = services.comparison(request.user, pk)
        try:
            samples = serializers.BooleanField().to_internal_value(
                request.query_params.get("samples", "true")
            )
        except ValidationError as exc:
            raise ValidationError({"samples": exc.detail}) from None
        chunks = exports.json_chunks(c, samples=samples)
        return StreamingHttpResponse(chunks, content_type="application/json")


# --- tokens ---------------------------------------------------------------------------


class TokenList(generics.ListCreateAPIView[Any]):
    """Your API tokens (GET, with a token too), a new one (POST: the token is in the answer,
    once) and revoking them all (DELETE). Creating and revoking need a logged-in session
    (the page /accounts/tokens/ makes tokens without the API): a token never manages
    tokens."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [permissions.IsAuthenticated, TokenScopes, ManagedBySession]
    serializer_class = s.TokenSerializer
    filter_backends: list[Any] = []

    @property
    def throttle_scope(self) -> str | None:
        return "token" if self.request.method == "POST" else None

    def get_queryset(self) -> Any:
        return services.tokens(self.request.user)

    @extend_schema(tags=["tokens"])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        tags=["tokens"],
        request=s.TokenRequestSerializer,
        responses={201: s.NewTokenSerializer},
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = s.TokenRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            instance, token = services.create_token(request.user, form.validated_data["scopes"])
        except services.TokenLimit as exc:
            raise PermissionDenied(str(exc)) from None
        instance.token = token
        return Response(s.NewTokenSerializer(instance).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["tokens"],
        operation_id="tokens_revoke_all",
        request=None,
        responses={200: s.RevokedSerializer},
    )
    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Revoke every one of your tokens (one that leaked, and its spares)."""
        revoked = services.revoke_all(request.user, reason="revoked by the owner")
        return Response({"revoked": revoked})


@extend_schema(tags=["tokens"], responses={204: None})
class TokenRevoke(APIView):
    """Revoke one of your tokens by its first characters (token_key), from a logged-in
    session."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [permissions.IsAuthenticated, TokenScopes, ManagedBySession]

    def delete(self, request: Request, token_key: str) -> Response:
        if not services.revoke_token(request.user, token_key):
            return Response({"detail": "no such token"}, status=status.HTTP_404_NOT_FOUND)
        return Response(status=status.HTTP_204_NO_CONTENT)
