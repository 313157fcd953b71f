"""The comparison list's filters: a plain GET form (works without JavaScript).

The tree and submitter choices come from the comparisons the user may see, so that a
private tree's name or a member's account shows to no one who could not find it anyway.
They are read as (name, id) pairs (a ModelChoiceField read them through a server-side
cursor, three round trips, and again to validate the chosen name), kept CHOICES_SECONDS,
and the page renders `selects` rather than the option widgets (~5 ms a page).
"""

from dataclasses import dataclass
from typing import Any, cast

from django import forms
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db.models import QuerySet
from django.forms.utils import ErrorList

from benchmarks import registry
from stats.verdicts import SEVERITY
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.trees.models import Tree

ANY = ("", "any")


@dataclass(frozen=True)
class Select:
    """One filter as the page shows it: a <select> with its options and errors."""

    name: str
    id: str
    label: str
    options: list[tuple[str, str, bool]]  # value, label, selected
    errors: ErrorList


# The tree and submitter choices are kept this long per scope (each process's cache): the
# two queries took ~3 ms of a ~20 ms page. So a tree or a submitter seen for the first
# time joins the choices up to this late, and a tree made private leaves the anonymous
# choices up to this late (its comparisons leave the rows at once).
CHOICES_SECONDS = 30


def _choices(visible: QuerySet[Comparison]) -> tuple[dict[str, int], dict[str, int]]:
    """The visible comparisons' trees and submitters, name to id, by name."""
    trees = Tree.objects.filter(pk__in=visible.values("revision_a__tree_id"))
    users = User.objects.filter(
        pk__in=visible.filter(submitted_by__isnull=False).values("submitted_by_id")
    )
    return (
        dict(trees.order_by("name").values_list("name", "pk")),
        dict(users.order_by("username").values_list("username", "pk")),
    )


class ComparisonFilter(forms.Form):
    tree = forms.ChoiceField(choices=[], required=False)
    submitter = forms.ChoiceField(choices=[], required=False)
    state = forms.ChoiceField(choices=[ANY, *ComparisonState.choices], required=False)
    verdict = forms.ChoiceField(choices=[ANY, *((v, v) for v in SEVERITY)], required=False)
    benchmark = forms.ChoiceField(choices=[], required=False)

    def __init__(self, data: Any, visible: QuerySet[Comparison], scope: str) -> None:
        """`visible`: the comparisons the user may see; `scope`: access.scope_key of the
        user, under which their choices are kept CHOICES_SECONDS."""
        super().__init__(data)
        key = f"reports:filter-choices:{scope}"
        choices = cache.get(key)
        if choices is None:
            choices = _choices(visible)
            cache.set(key, choices, CHOICES_SECONDS)
        self._tree_ids, self._user_ids = choices
        self._choices("tree", self._tree_ids)
        self._choices("submitter", self._user_ids)
        # Through the registry module at each call: a benchmark registered later is listed.
        self._choices("benchmark", sorted(registry.BENCHMARKS))

    def _choices(self, name: str, values: Any) -> None:
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)  # noqa: S101 - narrows the type
        field.choices = [ANY, *((v, v) for v in values)]

    @property
    def active(self) -> bool:
        return self.is_valid() and any(self.cleaned_data.values())

    @property
    def selects(self) -> list[Select]:
        """Every filter with its options, the chosen one selected."""
        out = []
        for bound in self:
            field = bound.field
            assert isinstance(field, forms.ChoiceField)  # noqa: S101 - narrows the type
            chosen = str(self.data.get(bound.html_name, ""))
            choices = cast("list[tuple[str, str]]", field.choices)  # as _choices set them
            options = [(str(v), str(label), str(v) == chosen) for v, label in choices]
            out.append(Select(bound.html_name, bound.auto_id, str(bound.label), options,
                              bound.errors))  # fmt: skip
        return out

    def apply(self, qs: QuerySet[Comparison]) -> QuerySet[Comparison]:
        """The rows the filters let through; none when a filter's value is not a choice
        (the form shows the error beside it)."""
        if not self.is_valid():
            return qs.none()
        d = self.cleaned_data
        if d["tree"]:
            qs = qs.filter(revision_a__tree_id=self._tree_ids[d["tree"]])
        if d["submitter"]:
            qs = qs.filter(submitted_by_id=self._user_ids[d["submitter"]])
        if d["state"]:
            qs = qs.filter(state=d["state"])
        if d["verdict"]:
            qs = qs.filter(verdict=d["verdict"])
        if d["benchmark"]:
            qs = qs.filter(benchmarks__contains=[d["benchmark"]])
        return qs
