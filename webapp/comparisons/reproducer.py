"""The shell commands that rerun a comparison with `./manage.py compare`.

Everything the comparison was asked for goes on the command line, defaults included, so
the rerun asks for the same comparison even after the command's defaults change.
"""

import shlex

from django.conf import settings
from django.urls import reverse

from benchmarks.registry import find, preset_params
from webapp.comparisons.models import Comparison


def public_url() -> str:
    """Where others reach this instance (the links in the reproducer and the CLI)."""
    return str(getattr(settings, "RCUBENCH_PUBLIC_URL", "http://127.0.0.1:8000")).rstrip("/")


def reproducer(c: Comparison) -> str:
    """The shell commands that rerun the comparison with `./manage.py compare`."""
    a, b, target = c.revision_a, c.revision_b, c.target
    lines = []
    args = ["./manage.py", "compare", "--tree", a.tree.name, "--base", a.ref]
    if b.series_id is not None:
        mbox = f"series-{b.series_id}.mbox"
        url = public_url() + reverse("reports:series-mbox", args=[b.series_id])
        lines.append(shlex.join(["curl", "-o", mbox, url]))
        args += ["--series", mbox]
        # Only with a series: without one there is nothing to fuzz, and the command refuses it.
        if b.patch_fallback:
            args.append("--allow-fuzz")
    else:
        args += ["--head", b.ref]
    for bench in c.benchmarks:
        args += ["--bench", bench]
        # A preset is rerun by its name; what it sets is said too, for a reader who boots
        # the kernel without rcubench.
        if note := _preset_note(bench):
            lines.append(note)
    args += ["--arch", target.arch, "--target", target.name,
             "--runs", str(c.min_runs), "--max-runs", str(c.max_runs)]  # fmt: skip
    if c.cmdline_a:
        args += ["--cmdline-a", c.cmdline_a]
    if c.cmdline_b:
        args += ["--cmdline-b", c.cmdline_b]
    # Always explicit: a change of the command's defaults must not change the rerun.
    args += ["--threshold", repr(float(c.threshold_pct)), "--alpha", repr(float(c.alpha))]
    # The seed fixes the ABBA run order: the same seed schedules the same runs.
    args += ["--seed", str(c.seed)]
    # What the command cannot express is said, not silently dropped.
    if a.series_id is not None:  # it applies a series to side B only
        lines.append(f"# note: side A had series {a.series_id} applied, which this cannot redo")
    if b.series_id is not None and b.ref != a.ref:  # it applies the series on the base ref
        lines.append(f"# note: side B applied the series on {b.ref}, this applies it on {a.ref}")
    lines.append(shlex.join(args))
    return "\n".join(lines)


def _preset_note(bench: str) -> str:
    """A comment with what the preset `bench` sets over its base and its whole rcuscale
    command line; empty for a benchmark that is no preset."""
    known = find(bench)
    if known is None or not known.spec.base:
        return ""
    spec = known.spec
    return (f"# {bench}: preset {spec.preset} of {spec.base}, which sets "
            f"{preset_params(spec)}; its kernel command line: {spec.cmdline}")  # fmt: skip
