"""The comparison list's filters: a plain GET form (works without JavaScript).

The tree and submitter choices come from the comparisons the user may see, so that a
private tree's name or a member's account shows to no one who could not find it anyway.
"""

from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.db.models import QuerySet

from benchmarks import registry
from webapp.analysis.engine import SEVERITY
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.trees.models import Tree

ANY = ("", "any")


class ComparisonFilter(forms.Form):
    tree = forms.ModelChoiceField(
        queryset=Tree.objects.none(), to_field_name="name", required=False, empty_label="any"
    )
    submitter = forms.ModelChoiceField(
        queryset=User.objects.none(), to_field_name="username", required=False,
        empty_label="any",
    )  # fmt: skip
    state = forms.ChoiceField(choices=[ANY, *ComparisonState.choices], required=False)
    verdict = forms.ChoiceField(choices=[ANY, *((v, v) for v in SEVERITY)], required=False)
    benchmark = forms.ChoiceField(choices=[], required=False)

    def __init__(self, data: Any, visible: QuerySet[Comparison]) -> None:
        super().__init__(data)
        tree = self.fields["tree"]
        submitter = self.fields["submitter"]
        assert isinstance(tree, forms.ModelChoiceField)  # noqa: S101 - narrows the type
        assert isinstance(submitter, forms.ModelChoiceField)  # noqa: S101
        tree.queryset = Tree.objects.filter(pk__in=visible.values("revision_a__tree_id"))
        submitter.queryset = User.objects.filter(
            pk__in=visible.filter(submitted_by__isnull=False).values("submitted_by_id")
        ).order_by("username")
        # Through the registry module at each call: a benchmark registered later is listed.
        self.fields["benchmark"].choices = [ANY, *((b, b) for b in sorted(registry.BENCHMARKS))]  # type: ignore[attr-defined]

    @property
    def active(self) -> bool:
        return self.is_valid() and any(self.cleaned_data.values())

    def apply(self, qs: QuerySet[Comparison]) -> QuerySet[Comparison]:
        """The rows the filters let through; none when a filter's value is not a choice
        (the form shows the error beside it)."""
        if not self.is_valid():
            return qs.none()
        d = self.cleaned_data
        if d["tree"] is not None:
            qs = qs.filter(revision_a__tree=d["tree"])
        if d["submitter"] is not None:
            qs = qs.filter(submitted_by=d["submitter"])
        if d["state"]:
            qs = qs.filter(state=d["state"])
        if d["verdict"]:
            qs = qs.filter(verdict=d["verdict"])
        if d["benchmark"]:
            qs = qs.filter(benchmarks__contains=[d["benchmark"]])
        return qs
