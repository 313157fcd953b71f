"""./manage.py bisect: bisect a statistic of a finished comparison (or attribute it to each
patch of its series) from a terminal, as the operator (no account: every comparison, trigger
"cli"), through the same state machine as the pages and the API; --follow prints each step
as it is answered and the outcome."""

import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.bisections import services, summary
from webapp.bisections.models import Bisection, Step
from webapp.celery import app
from webapp.states import Result

POLL_SECONDS = 2.0
WORKER_WAIT_SECONDS = 30.0  # a worker `make up` just started takes seconds to answer


class Command(BaseCommand):
    help = (
        "Bisect a primary statistic that regressed or improved in a finished comparison: "
        "find the commit of its range (or the patch of its series) that moved it, each step "
        "an ordinary comparison; or, with --attribute, measure every patch of its series "
        "against its parent. Prints the bisection's id and page; --follow waits. Needs the "
        "workers running (make up)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("comparison", type=int, help="the finished comparison's id")
        parser.add_argument(
            "--attribute", action="store_true",
            help="per-patch attribution: every patch of the comparison's series against its "
            "parent, at once, instead of a bisection",
        )  # fmt: skip
        parser.add_argument(
            "--statistic", metavar="BENCH/METRIC/STAT",
            help="the statistic to bisect, e.g. sync-rcu-latency/writer_duration/p50 "
            "(default: the first primary metric that regressed or improved)",
        )  # fmt: skip
        parser.add_argument(
            "--follow", action="store_true",
            help="wait for the outcome, printing each step as it is answered",
        )  # fmt: skip
        parser.add_argument("--timeout", type=float, default=0, help="stop following after s")

    def handle(self, *args: Any, **opts: Any) -> None:
        mode = Bisection.Mode.ATTRIBUTE if opts["attribute"] else Bisection.Mode.BISECT
        try:
            b, created = services.start(
                opts["comparison"], mode=mode, statistic=_statistic(opts["statistic"]),
                user=None, trigger=Bisection.Trigger.CLI,
            )  # fmt: skip
        except services.BisectionRefused as exc:
            raise CommandError(str(exc)) from None
        what = "started" if created else "was already running: this request joined it"
        self.stdout.write(f"bisection {b.pk} {what}: {summary.url(b)}")
        s = summary.summarize(b)
        self.stdout.write(
            f"{b.get_mode_display()} of comparison {b.comparison_id}, {s.statistic} "
            f"{s.original_effect} ({b.original_verdict}): {b.n} {_positions(b)}, at most "
            f"{s.steps_needed} steps"
        )
        if not opts["follow"]:
            return
        if not s.done:
            self._require_worker()
        self._follow(b, opts["timeout"])

    def _require_worker(self) -> None:
        deadline = time.monotonic() + WORKER_WAIT_SECONDS
        while not app.control.ping(timeout=2):
            if time.monotonic() > deadline:
                raise CommandError("no rcubench worker answers on the broker: start them (make up)")

    def _follow(self, b: Bisection, timeout: float) -> None:
        """Poll the database until the bisection ends, a line per step answered and per
        state; Ctrl-C stops following (the bisection goes on)."""
        printed: set[int] = set()
        state = ""
        started = time.monotonic()
        try:
            while True:
                b.refresh_from_db()
                s = summary.summarize(b)
                if b.state != state and not s.done:  # "done" comes after its last steps
                    state = b.state
                    self.stdout.write(b.state)
                for step in s.steps:
                    if step.answer and step.pk not in printed:
                        printed.add(step.pk)
                        self.stdout.write(step_line(b, step))
                if s.done:
                    self.stdout.write(b.state)
                    break
                if timeout and time.monotonic() - started > timeout:
                    raise CommandError(f"still {b.state} after {timeout:.0f} s: {summary.url(b)}")
                wait(POLL_SECONDS)
        except KeyboardInterrupt:
            raise CommandError(f"stopped following; bisection {b.pk} goes on: {summary.url(b)} "
                               "(run the same command to follow it again)") from None  # fmt: skip
        if b.result != Result.OK:
            raise CommandError(f"bisection {b.pk} {b.result}: {b.error_code}: {b.error_message}")
        self.stdout.write(f"{b.get_outcome_display()}: {b.summary}")


def wait(seconds: float) -> None:
    """Between two polls (a test stands in for the worker here)."""
    time.sleep(seconds)


def step_line(b: Bisection, step: Step) -> str:
    """`bisect 3/7 1a2b3c4d5e6f ("rcu: ..."): like B, +9.12% [+7.01, +11.2] (comparison
    #12: CI ... past half the effect)`."""
    commit = b.commits[step.position - 1]
    name = summary.label(b, step.position)
    if commit.get("sha"):
        name = f'{step.position}/{b.n} {name} ("{commit.get("subject", "")}")'
    else:
        name = f'{name} ("{commit.get("subject", "")}")'
    effect = summary.step_effect(step, b.unit)
    answer = step.get_answer_display() + (f", {effect}" if effect else "")
    return f"{step.kind} {name}: {answer} ({step.reason})"


def _positions(b: Bisection) -> str:
    if b.kind == Bisection.Kind.SERIES:
        return "patches" if b.n != 1 else "patch"
    return "commits" if b.n != 1 else "commit"


def _statistic(text: str | None) -> tuple[str, str, str] | None:
    if not text:
        return None
    parts = text.split("/")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise CommandError(
            "--statistic: give BENCH/METRIC/STAT, e.g. sync-rcu-latency/writer_duration/p50"
        )
    return parts[0].strip(), parts[1].strip(), parts[2].strip()
