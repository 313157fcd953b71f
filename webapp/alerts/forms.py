"""The subscription form: trees the user may see, benchmarks from the registry."""

from typing import Any

from django import forms

from benchmarks.registry import BENCHMARKS
from webapp import access
from webapp.access import AnyUser
from webapp.alerts.models import SUBSCRIBABLE, Kind
from webapp.trees.models import Tree


class SubscriptionForm(forms.Form):
    tree = forms.ModelChoiceField(
        queryset=Tree.objects.none(), required=False, empty_label="every tree I may see"
    )
    benchmark = forms.ChoiceField(required=False)
    kinds = forms.MultipleChoiceField(
        choices=SUBSCRIBABLE, initial=[Kind.REGRESSION], widget=forms.CheckboxSelectMultiple,
        help_text="Regressions by default; improvements and change points on request.",
    )  # fmt: skip

    def __init__(self, user: AnyUser, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tree_field = self.fields["tree"]
        assert isinstance(tree_field, forms.ModelChoiceField)  # noqa: S101 - declared above
        tree_field.queryset = access.visible_trees(user)
        bench_field = self.fields["benchmark"]
        assert isinstance(bench_field, forms.ChoiceField)  # noqa: S101 - declared above
        bench_field.choices = [("", "every benchmark"), *((n, n) for n in sorted(BENCHMARKS))]
