"""The REST API of a watched tree's history: /api/v1/trees/<name>/history/ (read-only).

Authentication and throttles are the API's defaults (settings.REST_FRAMEWORK: token or
session, anonymous and per-user rates); visibility is webapp.access's, as on the page."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp import access
from webapp.watch import history


class HistoryPointSerializer(serializers.Serializer[history.HistoryPoint]):
    push_id = serializers.IntegerField()
    sha = serializers.CharField(help_text="The tested head.")
    received_at = serializers.DateTimeField()
    comparison_id = serializers.IntegerField()
    median = serializers.FloatField(help_text="Median of the B side's per-run values.")
    ci_low = serializers.FloatField(allow_null=True, help_text="95% order-statistic CI of it.")
    ci_high = serializers.FloatField(allow_null=True)
    n_runs = serializers.IntegerField()
    verdict = serializers.CharField(help_text="The comparison's verdict on this metric.")


class HistoryChangeSerializer(serializers.Serializer[history.ChangeMark]):
    push_id = serializers.IntegerField(help_text="The first tested head after the change.")
    sha = serializers.CharField()
    before_median = serializers.FloatField()
    after_median = serializers.FloatField()
    change_pct = serializers.FloatField()
    regression = serializers.BooleanField(help_text="In the metric's worse direction.")


class HistorySeriesSerializer(serializers.Serializer[history.Series]):
    branch = serializers.CharField()
    target = serializers.CharField()
    benchmark = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    lower_is_better = serializers.BooleanField()
    points = HistoryPointSerializer(many=True)
    change_points = HistoryChangeSerializer(many=True)


class TreeHistorySerializer(serializers.Serializer[history.TreeHistory]):
    tree = serializers.CharField(source="tree.name")
    series = HistorySeriesSerializer(many=True)


class TreeHistoryView(APIView):
    """Each tested head's primary metrics per branch and target, in push order, with the
    change points found in them; comparisons you may not see are left out."""

    @extend_schema(
        tags=["trees"],
        parameters=[OpenApiParameter("branch", str, description="Only this branch.")],
        responses={200: TreeHistorySerializer},
    )
    def get(self, request: Request, name: str) -> Response:
        tree = access.get_visible(access.visible_trees(request.user), name=name)
        branch = request.query_params.get("branch") or None
        found = history.tree_history(tree, request.user, branch)
        return Response(TreeHistorySerializer(found).data)
