"""./manage.py sweep: one A/B pair across the points of an axis (a target's topology, a
boot parameter's values or the benchmark's variant parameter), through the same pipeline as
the web app and the API; waits and prints each point's verdict, the slopes and the scaling
(or interaction) verdict."""

import json
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from stats import defaults
from webapp.comparisons.models import Comparison
from webapp.comparisons.submission import ComparisonRequest, SubmissionError
from webapp.sweeps import services
from webapp.sweeps.models import Sweep
from webapp.sweeps.summary import SweepSummary, summary
from webapp.trees.services import DEFAULT_TREE

POLL_SECONDS = 5


class Command(BaseCommand):
    help = (
        "Sweep: compare two kernels (base vs head, or base vs base + a series) at every value "
        "of one axis, --topology 2,4,8 (vCPUs of --target, or SxCxT), --param NAME --values "
        "V1,V2 (a boot parameter) or --variant NAME --values V1,V2 (the benchmark's own, e.g. "
        "rcuscale.nwriters); wait and print the points and the scaling verdict. Needs the "
        "workers (make up)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tree", default=DEFAULT_TREE, help="registered tree name")
        parser.add_argument("--base", help="base ref (side A)")
        head = parser.add_mutually_exclusive_group()
        head.add_argument("--head", default="", help="head ref (side B); default: the base")
        head.add_argument("--series", type=Path, help="mbox of a patch series for side B")
        parser.add_argument("--bench", action="append", help="benchmark (repeatable; the first "
                            "one's primary is judged)")  # fmt: skip
        parser.add_argument("--target", default="qemu-x86_64", help="the base target")
        axis = parser.add_mutually_exclusive_group()
        axis.add_argument("--topology", help="comma-separated topologies: vCPU counts or SxCxT")
        axis.add_argument("--param", help="the boot parameter swept (with --values)")
        axis.add_argument("--variant", help="the benchmark's parameter swept (with --values), "
                          "e.g. rcuscale.nwriters")  # fmt: skip
        parser.add_argument("--values", default="",
                            help="comma-separated values of --param or --variant")  # fmt: skip
        parser.add_argument(
            "--linear", action="store_true",
            help="slopes on linear scales (default: log-log for a topology or a count)",
        )  # fmt: skip
        parser.add_argument("--runs", type=int, default=defaults.MIN_RUNS,
                            help="runs per side per point at the first look")  # fmt: skip
        parser.add_argument("--max-runs", type=int, default=defaults.MAX_RUNS)
        parser.add_argument("--cmdline-a", default="")
        parser.add_argument("--cmdline-b", default="")
        parser.add_argument("--threshold", type=float, default=defaults.THRESHOLD_PCT)
        parser.add_argument("--seed", type=int)
        parser.add_argument("--no-wait", action="store_true", help="submit and print the id")
        parser.add_argument("--follow", type=int, metavar="ID", help="wait for sweep ID")
        parser.add_argument("--cancel", type=int, metavar="ID", help="cancel sweep ID")
        parser.add_argument("--timeout", type=float, default=0, help="stop waiting after s")
        parser.add_argument("--format", choices=["table", "json"], default="table")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["cancel"]:
            sweep = _get(opts["cancel"])
            ended = services.cancel(sweep, by="cli", how="from the command line")
            self.stdout.write(f"sweep {sweep.pk} cancelled: {ended} unfinished points ended")
            return
        sweep = _get(opts["follow"]) if opts["follow"] else self._submit(opts)
        if not opts["follow"]:
            self.stdout.write(f"sweep {sweep.pk} submitted: {len(sweep.values)} points")
            if opts["no_wait"]:
                return
        start = time.monotonic()
        while True:
            sweep.refresh_from_db()
            if sweep.done:
                break
            if opts["timeout"] and time.monotonic() - start > opts["timeout"]:
                raise CommandError(f"sweep {sweep.pk} still running after {opts['timeout']} s")
            time.sleep(POLL_SECONDS)
        s = summary(sweep)
        if opts["format"] == "json":
            self.stdout.write(json.dumps(_jsonable(s), default=str))
        else:
            self.stdout.write(table(s))

    def _submit(self, opts: dict[str, Any]) -> Sweep:
        if not opts["base"]:
            raise CommandError("--base is required")
        if opts["topology"]:
            axis, values, parameter = "topology", opts["topology"], ""
        elif opts["param"]:
            axis, values, parameter = "cmdline", opts["values"], opts["param"]
        elif opts["variant"]:
            axis, values, parameter = "variant", opts["values"], opts["variant"]
        else:
            raise CommandError("give --topology VALUES, or --param or --variant NAME with "
                               "--values VALUES")  # fmt: skip
        mbox = None
        if opts["series"]:
            try:
                mbox = opts["series"].read_bytes()
            except OSError as exc:
                raise CommandError(f"cannot read {opts['series']}: {exc.strerror}") from None
        pair = ComparisonRequest(
            tree=opts["tree"], base_ref=opts["base"], head_ref=opts["head"], series_mbox=mbox,
            benchmarks=tuple(opts["bench"] or ["sync-rcu-latency"]), target=opts["target"],
            cmdline_a=opts["cmdline_a"], cmdline_b=opts["cmdline_b"], min_runs=opts["runs"],
            max_runs=max(opts["max_runs"], opts["runs"]), threshold_pct=opts["threshold"],
            seed=opts["seed"], trigger=Comparison.Trigger.CLI, requested_by="cli",
        )  # fmt: skip
        request = services.SweepRequest(
            pair=pair, axis=axis, parameter=parameter,
            values=tuple(v.strip() for v in values.split(",") if v.strip()),
            log_axis=False if opts["linear"] else None,
        )  # fmt: skip
        try:
            return services.submit_sweep(request)
        except SubmissionError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None


def _get(pk: int) -> Sweep:
    sweep = Sweep.objects.filter(pk=pk).first()
    if sweep is None:
        raise CommandError(f"no sweep {pk}")
    return sweep


def _jsonable(s: SweepSummary) -> dict[str, object]:
    out = dict(vars(s))
    out["points"] = [dict(vars(p)) for p in s.points]
    return out


def table(s: SweepSummary) -> str:
    """The points, one line each, and the verdict sentence."""
    lines = [f"sweep {s.pk}: {s.benchmark} {s.metric} {s.statistic} against {s.axis_label}"]
    for p in s.points:
        shift = "" if p.shift_pct is None else f"{p.shift_pct:+.2f}%"
        if p.ci_low_pct is not None and p.ci_high_pct is not None:
            shift += f" [{p.ci_low_pct:+.2f}, {p.ci_high_pct:+.2f}]"
        lines.append(f"  {p.value:>10}  #{p.comparison_id:<6} {p.state:<10} "
                     f"{p.verdict or '-':<22} {shift}  {p.note}".rstrip())  # fmt: skip
    lines.append(s.sentence)
    return "\n".join(lines)
