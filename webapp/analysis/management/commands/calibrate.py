"""./manage.py calibrate --build ID --benchmark NAME: A/A false-alarm rates and noise floor,
and for a metric in whole jiffies the dispersion index D of its boots (stored).
./manage.py calibrate --comparison ID --benchmark NAME: D from an A/A comparison's boots."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from stats.calibration import ALPHAS
from stats.jiffies import DISPERSION_LIMIT
from stats.methods import StatsInputError
from webapp.analysis.models import JiffyDispersion
from webapp.analysis.services import (
    NotJiffies,
    calibrate_build,
    dispersion_of_build,
    dispersion_of_comparison,
)
from webapp.comparisons.models import Comparison
from webapp.trees.models import Build


class Command(BaseCommand):
    help = (
        "Split the stored runs of one build into many A/A comparisons (blocks of consecutive "
        "runs kept together) and report the primary test's false-alarm rate and the noise "
        "floor; for a metric in jiffies, also the dispersion index D of its boots (stored). "
        "With --comparison (an A/A comparison: one kernel on both sides), D of its boots only."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--build", type=int, help="Build id")
        source.add_argument("--comparison", type=int, help="an A/A comparison's id: D only")
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--metric", help="default: the benchmark's primary metric")
        parser.add_argument("--block", type=int, default=4, help="consecutive runs per block")
        parser.add_argument("--splits", type=int, default=1000)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["comparison"] is not None:
            self._comparison(opts)
            return
        try:
            build = Build.objects.get(pk=opts["build"])
        except Build.DoesNotExist:
            raise CommandError(f"no build with id {opts['build']}") from None
        try:
            metric, statistic, cal = calibrate_build(
                build, opts["benchmark"], opts["metric"], block=opts["block"],
                splits=opts["splits"], seed=opts["seed"],
            )  # fmt: skip
        except (KeyError, StatsInputError) as exc:
            raise CommandError(str(exc).strip('"')) from None
        out = self.stdout.write
        out(f"{opts['benchmark']}/{metric} [{statistic}] of build {build.pk} ({build.sha[:12]}, "
            f"{build.arch}): {cal.runs} runs, blocks of {cal.block}, {cal.splits} A/A splits "
            f"of {cal.runs_per_side} runs per side")  # fmt: skip
        for alpha in ALPHAS:
            out(f"  false alarms at alpha {alpha:.2f}: {cal.false_alarms[alpha]:6.1%}")
        out(f"  noise floor: median {cal.median:.6g}, run-to-run CV {cal.cv_pct:.2f}%")
        for n, mde in cal.mde_pct.items():
            out(
                f"  smallest detectable shift at {n} runs per side (80% power, alpha "
                f"{cal.mde_alpha:.4f}, the last look's): {mde:.2f}%"
            )
        try:
            d = dispersion_of_build(build, opts["benchmark"], metric)
        except NotJiffies:
            return  # not a metric in jiffies, or no HZ: nothing to count
        except StatsInputError as exc:
            raise CommandError(str(exc)) from None
        out(self._dispersion_line(d))

    def _comparison(self, opts: dict[str, Any]) -> None:
        try:
            comparison = Comparison.objects.get(pk=opts["comparison"])
        except Comparison.DoesNotExist:
            raise CommandError(f"no comparison with id {opts['comparison']}") from None
        try:
            d = dispersion_of_comparison(comparison, opts["benchmark"], opts["metric"])
        except (KeyError, NotJiffies, StatsInputError) as exc:
            raise CommandError(str(exc).strip('"')) from None
        self.stdout.write(f"{d.benchmark}/{d.metric} of comparison {comparison.pk} (A/A, "
                          f"build {d.build_id}):")  # fmt: skip
        self.stdout.write(self._dispersion_line(d))

    @staticmethod
    def _dispersion_line(d: JiffyDispersion) -> str:
        if d.index is None:
            return (f"  dispersion index D: undefined ({d.boots} boots, {d.samples} samples, "
                    f"none or all above the mode of {d.mode} jiffies)")  # fmt: skip
        branch = ("D > 1.5: boot-level effect; report the achievable move and find its cause"
                  if d.index > DISPERSION_LIMIT else
                  "D <= 1.5: binomial sampling; the 1.5-point target applies")  # fmt: skip
        return (f"  dispersion index D {d.index:.2f} (chi-square p {d.p_value:.2g}) of per-boot "
                f"counts above the mode of {d.mode} jiffies (HZ {d.hz}): {d.boots} boots, "
                f"{d.samples} samples, {d.share_above:.2%} above the mode; {branch} "
                f"(stored as #{d.pk})")  # fmt: skip
