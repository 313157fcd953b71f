"""The submission form (`/submit/`): it collects what the submission service takes and
checks only what the service cannot (one source for side B, the upload's size); every other
refusal is the service's, shown beside the field it names."""

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from benchmarks.registry import BENCHMARKS
from stats import defaults
from webapp import access
from webapp.comparisons.models import NOT_DERIVED, Comparison, Target

# The fuzz fallback, in the words of ComparisonRequest.patch_fallback.
FUZZ_NOTE = (
    "If the series does not apply with plain git am, the build retries with git am -3, then "
    "with patch -F3 (fuzz). It may then apply, with offsets or fuzz, to a base it was not "
    "written against; the report says how it applied."
)
# The service's field -> the form's: "series" is whichever of mbox / message_id gave it.
FIELDS = {
    "tree": "tree", "base_ref": "base_ref", "head_ref": "head_ref", "series": "mbox",
    "patch_fallback": "patch_fallback", "benchmarks": "benchmarks", "target": "target",
    "arch": "target", "cmdline_a": "cmdline_a", "cmdline_b": "cmdline_b",
    "min_runs": "min_runs", "max_runs": "max_runs", "threshold_pct": "threshold_pct",
    "visibility": "visibility",
}  # fmt: skip


def too_large_message(limit: int) -> str:
    return f"file too large: the mbox is more than {limit} bytes; the limit is {limit}"


class SubmitForm(forms.Form):
    tree = forms.ChoiceField(help_text="the trees you may submit to")
    base_ref = forms.CharField(
        label="base ref", strip=True, help_text="side A: a branch, tag or sha (v6.12, HEAD~2)"
    )
    head_ref = forms.CharField(
        label="head ref", required=False, help_text="side B: another ref of the tree"
    )
    mbox = forms.FileField(
        label="patch series (mbox)", required=False,
        help_text="or side B is the base plus this series (git format-patch / send-email)",
    )  # fmt: skip
    message_id = forms.CharField(
        label="lore message-id", required=False,
        help_text="or side B is the base plus this series, fetched from lore.kernel.org with b4",
    )  # fmt: skip
    patch_fallback = forms.BooleanField(
        label="allow fuzz (git am -3, then patch -F3)", required=False, help_text=FUZZ_NOTE
    )
    benchmarks = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        help_text="a preset (<benchmark>--<preset>) is a reviewed rcuscale variant, a "
        "benchmark of its own: its numbers never mix with the benchmark's",
    )  # fmt: skip
    target = forms.ChoiceField()
    min_runs = forms.IntegerField(
        label="runs per side at the first look", initial=defaults.MIN_RUNS
    )
    max_runs = forms.IntegerField(label="runs per side at most", initial=defaults.MAX_RUNS)
    threshold_pct = forms.FloatField(
        label="practical threshold (%)", initial=defaults.THRESHOLD_PCT,
        help_text="a shift smaller than this is not a meaningful change",
    )  # fmt: skip
    cmdline_a = forms.CharField(
        label="extra kernel command line, side A", required=False,
        help_text="allow-listed RCU and placement parameters only",
    )  # fmt: skip
    cmdline_b = forms.CharField(label="extra kernel command line, side B", required=False)
    visibility = forms.ChoiceField(
        required=False,
        choices=[
            ("", "the tree's default (public for a public tree)"),
            *Comparison.Visibility.choices,
        ],
        help_text="restricted: only the tree's members see it (embargoed fixes)",
    )

    def __init__(self, user: AbstractBaseUser, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        trees = access.submittable_trees(user).order_by("name")
        self.fields["tree"].choices = [(t.name, t.name) for t in trees]  # type: ignore[attr-defined]
        self.fields["benchmarks"].choices = [  # type: ignore[attr-defined]
            (name, f"{name}: {b.spec.description}") for name, b in BENCHMARKS.items()
        ]
        self.fields["benchmarks"].initial = ["sync-rcu-latency"]
        # Targets derived for sweeps are a sweep's business, not a choice of their own.
        targets = Target.objects.filter(NOT_DERIVED, enabled=True).order_by("name")
        self.fields["target"].choices = [  # type: ignore[attr-defined]
            (t.name, f"{t.name} ({t.arch}{': ' + t.description if t.description else ''})")
            for t in targets
        ]
        self.fields["target"].initial = "qemu-x86_64"  # the CLI's default (--arch x86_64)

    def clean_mbox(self) -> Any:
        upload = self.cleaned_data.get("mbox")
        limit = settings.RCUBENCH_MAX_MBOX_BYTES
        if upload is not None and upload.size > limit:
            raise forms.ValidationError(too_large_message(limit))
        return upload

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        given = [f for f in ("head_ref", "mbox", "message_id") if data.get(f)]
        if len(given) > 1:
            raise forms.ValidationError(
                "give one of head ref, mbox and message-id for side B, not "
                + " and ".join(str(self.fields[f].label or f) for f in given)
            )
        return data
