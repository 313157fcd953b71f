"""./manage.py compare: an A/B comparison from a terminal, through the same pipeline as the
web app (the running workers build, boot and analyse), with progress and the verdict table."""

import json
import os
import time
from argparse import ArgumentParser
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from tqdm import tqdm

from benchmarks.registry import describe_presets
from stats import defaults
from webapp.celery import app
from webapp.comparisons import exports, orchestrator, remote, terminal
from webapp.comparisons.console_diff import console_differences
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.comparisons.names import kernel_names
from webapp.comparisons.progress import Progress, progress
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.comparisons.summary import VerdictRow, report_url, verdict_rows
from webapp.states import Result
from webapp.trees.models import Tree
from webapp.trees.services import DEFAULT_TREE, InvalidTree, register_local_tree

# The CLI's option for each field of the request, so a refusal names what the user typed.
_OPTION = {
    "tree": "--tree", "base_ref": "--base", "head_ref": "--head", "series": "--series",
    "patch_fallback": "--allow-fuzz", "benchmarks": "--bench", "target": "--target",
    "arch": "--arch", "cmdline_a": "--cmdline-a", "cmdline_b": "--cmdline-b",
    "min_runs": "--runs", "max_runs": "--max-runs", "alpha": "--alpha",
    "threshold_pct": "--threshold", "seed": "--seed",
}  # fmt: skip


class Command(BaseCommand):
    as_json = False  # --format json
    help = (
        "Compare two kernels (base vs head ref, or base vs base + a patch series, or one "
        "kernel with two command lines) on a target; wait, showing progress, and print the "
        "verdicts and the report URL. Needs the workers running (make up)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--tree",
            default=DEFAULT_TREE,
            help="registered tree name, or a local git repository path",
        )
        parser.add_argument("--base", help="base ref (side A)")
        head = parser.add_mutually_exclusive_group()
        head.add_argument("--head", default="", help="head ref (side B); default: the base")
        head.add_argument("--series", type=Path, help="mbox of a patch series for side B")
        parser.add_argument(
            "--allow-fuzz",
            action="store_true",
            help="if the series does not apply with git am, retry with git am -3, then with "
            "patch -F3 (fuzz): it may then apply, with offsets or fuzz, to a base it was not "
            "written against; the report says how it applied",
        )
        parser.add_argument(
            "--bench", action="append",
            help="benchmark (repeatable); a preset, a reviewed rcuscale variant, is named as "
            f"one: {describe_presets()}",
        )  # fmt: skip
        parser.add_argument("--arch", default="x86_64", choices=["x86_64", "ppc64le"])
        parser.add_argument("--target", help="target name (default: qemu-<arch>)")
        parser.add_argument("--runs", type=int, default=defaults.MIN_RUNS,
                            help="runs per side at the first look")  # fmt: skip
        parser.add_argument("--max-runs", type=int, default=defaults.MAX_RUNS,
                            help="runs per side at most")  # fmt: skip
        parser.add_argument("--cmdline-a", default="", help="extra kernel command line, side A")
        parser.add_argument("--cmdline-b", default="", help="extra kernel command line, side B")
        parser.add_argument("--threshold", type=float, default=defaults.THRESHOLD_PCT,
                            help="practical threshold %%")  # fmt: skip
        parser.add_argument("--alpha", type=float, default=defaults.ALPHA)
        parser.add_argument("--seed", type=int, help="seed of the ABBA run order (default: random)")
        parser.add_argument("--no-wait", action="store_true", help="submit and print the id")
        parser.add_argument("--follow", type=int, metavar="ID", help="wait for comparison ID")
        parser.add_argument("--cancel", type=int, metavar="ID", help="cancel comparison ID")
        parser.add_argument("--timeout", type=float, default=0, help="stop waiting after s")
        parser.add_argument(
            "--format", choices=["table", "json"], default="table",
            help="table: the verdict table, fit to the terminal's width ($COLUMNS; 80 "
            "off a terminal); json: the comparison's summary as one JSON object on stdout "
            "(docs/api/README.md, 'The summary'), progress on stderr",
        )  # fmt: skip
        parser.add_argument(
            "--server", metavar="URL",
            help="submit and follow through the REST API of the rcubench at URL (e.g. "
            "https://rcubench.example.org) instead of this machine's database; --tree is "
            "then a tree's name on that server",
        )  # fmt: skip
        parser.add_argument(
            "--token", default=os.environ.get("RCUBENCH_TOKEN", ""),
            help="API token for --server (default: $RCUBENCH_TOKEN; create one at "
            "<server>/accounts/tokens/)",
        )  # fmt: skip

    def handle(self, *args: Any, **opts: Any) -> None:
        self.as_json = opts["format"] == "json"
        if opts["server"]:
            self._handle_remote(opts)
            return
        if opts["cancel"]:
            if not orchestrator.cancel(opts["cancel"], "cancelled from the command line"):
                raise CommandError(f"comparison {opts['cancel']} had already ended")
            self.stdout.write(f"comparison {opts['cancel']} cancelled")
            return
        if opts["follow"]:
            comparison = _get(opts["follow"])
        else:
            comparison = self._submit(opts)
            self._submitted(comparison.pk, report_url(comparison), opts["no_wait"])
            if opts["no_wait"]:
                return
        if comparison.state != ComparisonState.DONE:  # an ended one needs no worker to show
            self._require_worker()

        def poll() -> tuple[str, Progress]:
            comparison.refresh_from_db()
            return comparison.state, progress(comparison)

        def cancel() -> None:
            orchestrator.cancel(comparison.pk, "cancelled from the command line (Ctrl-C)")

        self._wait(comparison.pk, poll, cancel, opts["timeout"])
        if self.as_json:
            self._json(exports.summary(comparison))
        else:
            self._summary(comparison)
        if comparison.result != Result.OK:
            raise CommandError(f"comparison {comparison.pk} {comparison.result}: "
                               f"{comparison.error_code}: {comparison.error_message}")  # fmt: skip

    def _submit(self, opts: dict[str, Any]) -> Comparison:
        if not opts["base"]:
            raise CommandError("--base is required")
        mbox = None
        if opts["series"]:
            try:
                mbox = opts["series"].read_bytes()
            except OSError as exc:
                raise CommandError(f"cannot read {opts['series']}: {exc.strerror}") from None
        try:
            # One transaction: a request refused at any step leaves nothing behind (not even
            # the tree a path registered).
            with transaction.atomic():
                return submit_comparison(
                    ComparisonRequest(
                        tree=_tree_name(opts["tree"]), base_ref=opts["base"],
                        head_ref=opts["head"], series_mbox=mbox,
                        patch_fallback=opts["allow_fuzz"],
                        benchmarks=tuple(opts["bench"] or ["sync-rcu-latency"]),
                        target=opts["target"] or f"qemu-{opts['arch']}", arch=opts["arch"],
                        cmdline_a=opts["cmdline_a"], cmdline_b=opts["cmdline_b"],
                        min_runs=opts["runs"], max_runs=opts["max_runs"], alpha=opts["alpha"],
                        threshold_pct=opts["threshold"], seed=opts["seed"],
                        trigger=Comparison.Trigger.CLI, requested_by="cli",
                    )
                )  # fmt: skip
        except SubmissionError as exc:
            raise CommandError(f"{_OPTION.get(exc.field, exc.field)}: {exc.message}") from None
        except InvalidTree as exc:
            raise CommandError(f"--tree: {exc}") from None

    def _require_worker(self) -> None:
        deadline = time.monotonic() + 30  # a worker `make up` just started takes seconds
        while not app.control.ping(timeout=2):
            if time.monotonic() > deadline:
                raise CommandError("no rcubench worker answers on the broker: start them (make up)")

    def _wait(self, pk: int, poll: Callable[[], tuple[str, Progress]],
              cancel: Callable[[], object], timeout: float) -> None:  # fmt: skip
        """Poll (the database, or the server's API) until the comparison ends, drawing a
        runs bar on a terminal, or printing a line per change of the progress elsewhere (a
        CI log keeps every bar redraw as a line); Ctrl-C cancels the comparison (and its
        VM). With --format json the progress goes to stderr: stdout holds the JSON only."""
        out = cast(TextIO, (self.stderr if self.as_json else self.stdout)._out)
        show = _Bar(out) if out.isatty() else _Lines(out)
        started = time.monotonic()
        try:
            while True:
                state, p = poll()
                show(p)
                if state == ComparisonState.DONE:
                    return
                if timeout and time.monotonic() - started > timeout:
                    raise CommandError(f"still {state} after {timeout:.0f} s; "
                                       f"follow it with --follow {pk}")  # fmt: skip
                time.sleep(1.0)
        except KeyboardInterrupt:
            cancel()
            raise CommandError(f"comparison {pk} cancelled") from None
        finally:
            show.close()

    def _submitted(self, pk: int, url: str, no_wait: bool) -> None:
        if not self.as_json:
            self.stdout.write(f"comparison {pk} submitted: {url}")
        elif no_wait:  # all a script gets before the comparison ends
            self._json({"id": pk, "report_url": url})
        else:  # beside the progress, unstyled (stderr's default style is the error's)
            self.stderr.write(f"comparison {pk} submitted: {url}", style_func=lambda s: s)

    def _json(self, summary: dict[str, Any]) -> None:
        # Sorted keys, indented: a diff of two runs' output shows what changed.
        self.stdout.write(json.dumps(summary, indent=2, sort_keys=True))

    def _summary(self, comparison: Comparison) -> None:
        a, b = kernel_names(comparison)
        self._table(verdict_rows(comparison), comparison.verdict, report_url(comparison),
                    (a.text, b.text))  # fmt: skip
        for d in console_differences(comparison):  # after the verdict, not part of it
            mark = " [finding]" if d.finding else ""
            for line in terminal.wrap(f"console: {d.benchmark}: {d.text}{mark}",
                                      terminal.width()):  # fmt: skip
                self.stdout.write(line)
        if n := comparison.diagnosis_per_side:  # after the verdict, not part of it
            why = (f"why: {n} traced runs a side of both kernels follow (docs/tracing.md); "
                   f"their grace-period phases: {report_url(comparison)}#diagnosis")  # fmt: skip
            for line in terminal.wrap(why, terminal.width()):
                self.stdout.write(line)

    def _table(
        self, verdicts: list[VerdictRow], verdict: str, url: str, kernels: tuple[str, str]
    ) -> None:
        for line in terminal.verdict_table(verdicts, verdict, url, terminal.width(), kernels):
            self.stdout.write(line)

    # --- through the REST API of another rcubench (--server) -------------------------

    def _handle_remote(self, opts: dict[str, Any]) -> None:
        try:
            client = remote.Client(opts["server"], opts["token"])
            if opts["cancel"]:
                try:
                    client.cancel(opts["cancel"])
                except remote.RemoteError as exc:
                    raise CommandError(f"comparison {opts['cancel']}: {exc.message}") from None
                self.stdout.write(f"comparison {opts['cancel']} cancelled")
                return
            if opts["follow"]:
                c = client.comparison(opts["follow"])
            else:
                c = self._submit_remote(client, opts)
                self._submitted(c.pk, c.report_url, opts["no_wait"])
                if opts["no_wait"]:
                    return

            def poll() -> tuple[str, Progress]:
                nonlocal c
                c = client.comparison(c.pk)
                return c.state, c.progress

            self._wait(c.pk, poll, lambda: client.cancel(c.pk), opts["timeout"])
            if self.as_json:
                self._json(client.summary(c.pk))
            else:
                self._table(
                    client.verdict_rows(c.pk), c.verdict, c.report_url, (c.name_a, c.name_b)
                )
        except remote.RemoteError as exc:
            raise CommandError(exc.message) from None
        if c.result != Result.OK:
            raise CommandError(f"comparison {c.pk} {c.result}: "
                               f"{c.error_code}: {c.error_message}")  # fmt: skip

    def _submit_remote(self, client: remote.Client, opts: dict[str, Any]) -> remote.Remote:
        if not opts["base"]:
            raise CommandError("--base is required")
        fields = {
            "tree": opts["tree"], "base_ref": opts["base"], "head_ref": opts["head"],
            "patch_fallback": opts["allow_fuzz"],
            "benchmarks": opts["bench"] or ["sync-rcu-latency"],
            "target": opts["target"] or f"qemu-{opts['arch']}", "arch": opts["arch"],
            "cmdline_a": opts["cmdline_a"], "cmdline_b": opts["cmdline_b"],
            "min_runs": opts["runs"], "max_runs": opts["max_runs"], "alpha": opts["alpha"],
            "threshold_pct": opts["threshold"], "seed": opts["seed"],
        }  # fmt: skip
        try:
            return client.submit(fields, opts["series"])
        except remote.RemoteError as exc:
            if exc.fields:  # name the option, as the local command does
                field, message = next(iter(exc.fields.items()))
                raise CommandError(f"{_OPTION.get(field, field)}: {message}") from None
            raise


class _Bar:
    """The runs bar, redrawn in place (a terminal)."""

    def __init__(self, out: TextIO) -> None:
        self.bar = tqdm(total=1, unit="run", dynamic_ncols=True, file=out)

    def __call__(self, p: Progress) -> None:
        self.bar.total = max(p.total, 1)
        self.bar.n = p.done
        self.bar.set_description(p.phase)
        self.bar.set_postfix_str(p.detail, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


class _Lines:
    """One line per change of the progress (a log file, a pipe)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.last: Progress | None = None

    def __call__(self, p: Progress) -> None:
        if p != self.last:
            self.last = p
            detail = f" ({p.detail})" if p.detail else ""
            self.out.write(f"{p.phase}: {p.done}/{p.total} runs{detail}\n")
            self.out.flush()

    def close(self) -> None:
        pass


def _get(pk: int) -> Comparison:
    try:
        return Comparison.objects.get(pk=pk)
    except Comparison.DoesNotExist:
        raise CommandError(f"no comparison with id {pk}") from None


def _tree_name(name_or_path: str) -> str:
    """A registered tree's name, or a local bare repository registered on first use (an
    operator's command; the web front ends take names only)."""
    if name_or_path == DEFAULT_TREE or Tree.objects.filter(name=name_or_path).exists():
        return name_or_path
    path = Path(name_or_path)
    if path.exists():  # register_local_tree refuses what is not a bare repository
        return register_local_tree(path).name
    return name_or_path  # submission refuses it, naming the trees it knows
