"""The sweep form (`/sweeps/new/`): the comparison form's fields (webapp/comparisons/forms.py)
and the axis; the sweep service decides, the form shows its refusals beside the field."""

from typing import Any

from django import forms

from webapp.comparisons.forms import SubmitForm
from webapp.sweeps.models import Sweep


class SweepForm(SubmitForm):
    axis = forms.ChoiceField(choices=Sweep.Axis.choices, initial=Sweep.Axis.TOPOLOGY)
    values = forms.CharField(
        help_text="comma-separated: vCPU counts of the target ('2, 4, 8', keeping its "
        "sockets and threads per core) or SxCxT ('1x2x8'); or the parameter's values",
    )  # fmt: skip
    parameter = forms.CharField(
        required=False, label="parameter",
        help_text="for a boot parameter axis: set to each value on both sides "
        "(e.g. rcutree.rcu_normal_wake_from_gp); for a variant axis: the benchmark's "
        "parameter, each value a variant of it (e.g. rcuscale.nwriters)",
    )  # fmt: skip

    def clean_values(self) -> tuple[str, ...]:
        return tuple(v.strip() for v in str(self.cleaned_data["values"]).split(",") if v.strip())

    def extra(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {"axis": data["axis"], "values": data["values"], "parameter": data["parameter"]}
