"""./manage.py calibrate --build ID --benchmark NAME: A/A false-alarm rates and noise floor."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from stats.calibration import ALPHAS
from stats.methods import StatsInputError
from webapp.analysis.services import calibrate_build
from webapp.trees.models import Build


class Command(BaseCommand):
    help = (
        "Split the stored runs of one build into many A/A comparisons (blocks of consecutive "
        "runs kept together) and report the primary test's false-alarm rate and the noise floor."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--build", type=int, required=True, help="Build id")
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--metric", help="default: the benchmark's primary metric")
        parser.add_argument("--block", type=int, default=4, help="consecutive runs per block")
        parser.add_argument("--splits", type=int, default=1000)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **opts: Any) -> None:
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
