"""The comparison list's filters (the same as the list page's): tree, submitter, state,
result, verdict, benchmark."""

from django.db.models import QuerySet
from django_filters import rest_framework as filters

from webapp.analysis.models import Verdict
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.states import Result


class ComparisonFilter(filters.FilterSet):
    tree = filters.CharFilter(
        field_name="revision_a__tree__name", max_length=64, help_text="A tree's name."
    )
    submitter = filters.CharFilter(
        field_name="submitted_by__username", max_length=150,
        help_text="The submitting account's user name.",
    )  # fmt: skip
    state = filters.ChoiceFilter(choices=ComparisonState.choices)
    result = filters.ChoiceFilter(choices=[c for c in Result.choices if c[0]])
    verdict = filters.ChoiceFilter(
        choices=Verdict.choices, help_text="The worst verdict over the metrics."
    )
    benchmark = filters.CharFilter(
        method="filter_benchmark", max_length=64, help_text="Comparisons that run this benchmark."
    )

    class Meta:
        model = Comparison
        fields = ["tree", "submitter", "state", "result", "verdict", "benchmark"]

    def filter_benchmark(
        self, qs: QuerySet[Comparison], name: str, value: str
    ) -> QuerySet[Comparison]:
        return qs.filter(benchmarks__contains=[value])
