"""The one way in: every front end (the CLI, the web form, the REST API; push webhooks
later) submits a comparison by calling `submit_comparison`, and nothing else.

A request is validated whole before anything is stored: refs, target (and whether a lab
pool takes this submitter's kernels: webapp/lab/pools.py), benchmarks, numbers, command
lines, then against the tree (`preflight`: the refs exist, the series applies), then the
patch series. A refused request raises `SubmissionError` naming the field and the problem,
and leaves nothing behind (no tree, series, revision or comparison), as everything it
stores is stored in one transaction.
"""

import math
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from benchmarks.cmdline import CmdlineError, check_extra
from benchmarks.registry import get as get_benchmark
from benchmarks.spec import BenchmarkSpec
from engine.build.git import BadRefError, validate_rev
from stats import defaults
from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.comparisons import preflight, serving
from webapp.comparisons.models import Comparison, Target
from webapp.lab import pools
from webapp.text import storable
from webapp.trees.models import PatchSeries, Revision, Tree
from webapp.trees.services import (
    DEFAULT_TREE,
    SUBJECT_MAX,
    InvalidSeries,
    default_tree,
    store_series,
)

log = logs.get(__name__)
CMDLINE_MAX = 1024
SEED_LIMIT = 2**62  # the seed column is a signed 64-bit integer; new seeds are 62 bits


class SubmissionError(ValueError):
    """A request refused before anything is stored: `field` names the request's field at
    fault (a form shows the message beside it, an API returns `as_dict()`). `detail`: the
    tool's own words where it has them (git's output for a patch that does not apply), for
    an answer that can quote them (a mail command's)."""

    def __init__(self, field: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.detail = detail

    def as_dict(self) -> dict[str, list[str]]:
        return {self.field: [self.message]}


@dataclass(frozen=True)
class ComparisonRequest:
    """What a user asks for, from any front end; names and bytes, not database rows."""

    tree: str  # a registered tree's name
    base_ref: str  # side A
    benchmarks: tuple[str, ...]
    target: str  # a Target's name
    head_ref: str = ""  # side B; empty with a series (applied on base_ref) or for A/A
    series_mbox: bytes | None = None  # a patch series (git format-patch / send-email mbox)
    # A series applied on base_ref for side A too (a bisection's step between two prefixes
    # of one series); needs series_mbox. Not offered by the form or the API.
    base_series_mbox: bytes | None = None
    # If the series does not apply with plain `git am`: `git am -3`, then `patch -F3`. It
    # may then apply, with offsets or fuzz, to a base it was not written against.
    patch_fallback: bool = False
    arch: str = ""  # if given, the target must be of this arch
    cmdline_a: str = ""
    cmdline_b: str = ""
    min_runs: int = defaults.MIN_RUNS
    max_runs: int = defaults.MAX_RUNS
    alpha: float = defaults.ALPHA
    threshold_pct: float = defaults.THRESHOLD_PCT
    seed: int | None = None  # of the ABBA run order; None: a fresh random one
    trigger: str = Comparison.Trigger.CLI
    requested_by: str = ""
    # The account submitting (web form, API): it must hold a role on the tree. None: the
    # operator's own command line on the server, which may submit anywhere.
    submitted_by: int | None = None
    visibility: str = ""  # "public" or "restricted"; empty: the tree's default
    # Comparisons of one cohort schedule each look's runs together (a sweep's points:
    # orchestrator.release_cohort). Not offered by the form or the API.
    cohort: str = ""


def submit_comparison(req: ComparisonRequest) -> Comparison:
    """Validate `req`, store the comparison and start it (once committed)."""
    with transaction.atomic():
        submitter = _submitter(req.submitted_by)
        tree = _tree(req.tree, submitter)
        _may_submit(submitter, tree)
        visibility = _visibility(req.visibility, tree)
        target = _target(req.target, req.arch)
        # A lab pool's hosts run the kernel as root on real hardware: whose kernels it takes.
        if why := pools.refusal(target, tree, trigger=req.trigger, submitter=submitter,
                                series=req.series_mbox is not None):  # fmt: skip
            raise SubmissionError("target", why)
        specs = _benchmarks(req.benchmarks, target)
        _validate(req, specs)
        try:  # against the tree: unknown refs, a series that does not apply
            commits = preflight.check(tree, req.base_ref, req.head_ref, req.series_mbox,
                                      fuzz=req.patch_fallback)  # fmt: skip
        except preflight.PreflightRefusal as exc:
            raise SubmissionError(exc.field, exc.message, exc.detail) from None
        if req.base_series_mbox is not None:  # side A's series, against the same base
            try:
                preflight.check(tree, req.base_ref, "", req.base_series_mbox,
                                fuzz=req.patch_fallback)  # fmt: skip
            except preflight.PreflightRefusal as exc:
                raise SubmissionError("base_series", f"side A: {exc.message}",
                                      exc.detail) from None  # fmt: skip
        series = _series(req.series_mbox) if req.series_mbox is not None else None
        series_a = None if req.base_series_mbox is None else _series(req.base_series_mbox)
        rev_a = Revision.objects.create(tree=tree, ref=req.base_ref, series=series_a,
                                        patch_fallback=req.patch_fallback and series_a is not None,
                                        **_resolved(commits, req.base_ref))  # fmt: skip
        head = req.head_ref or req.base_ref
        if head == req.base_ref and series is None:
            rev_b = rev_a  # A/A or a boot-parameter A/B: one build serves both sides
        else:
            rev_b = Revision.objects.create(
                tree=tree, ref=head, series=series, patch_fallback=req.patch_fallback,
                **_resolved(commits, head),
            )  # fmt: skip
        seed = {} if req.seed is None else {"seed": req.seed}
        comparison = Comparison.objects.create(
            revision_a=rev_a, revision_b=rev_b, cmdline_a=req.cmdline_a.strip(),
            cmdline_b=req.cmdline_b.strip(), benchmarks=list(req.benchmarks), target=target,
            min_runs=req.min_runs, max_runs=req.max_runs, alpha=req.alpha,
            threshold_pct=req.threshold_pct, trigger=req.trigger,
            requested_by=req.requested_by, submitted_by_id=req.submitted_by,
            visibility=visibility, cohort=req.cohort, **seed,
        )  # fmt: skip
        log.info(
            "comparison state", comparison=comparison.pk, state=comparison.state,
            trigger=req.trigger, target=target.name, benchmarks=list(req.benchmarks),
        )  # fmt: skip
        dispatch.send_advance(comparison.pk)
    return comparison


def _resolved(commits: dict[str, preflight.Commit], ref: str) -> dict[str, str]:
    """What the preflight found `ref` names, as a Revision records it: the base commit and
    its subject, so pages name the kernel before it is built (the build's sha replaces it)."""
    commit = commits.get(ref)
    if commit is None:
        return {}
    return {"base_sha": commit.sha, "subject": storable(commit.subject)[:SUBJECT_MAX]}


def _submitter(user_id: int | None) -> AnyUser | None:
    """The submitting account (an unknown or inactive one is anonymous); None for the
    operator's own command line."""
    if user_id is None:
        return None
    return User.objects.filter(pk=user_id, is_active=True).first() or AnonymousUser()


def _tree(name: str, submitter: AnyUser | None) -> Tree:
    """The tree named `name`. For an account, a tree it may not see (not public, not a
    member) is answered as an unknown name is, and the error lists only the trees it may
    submit to: neither a name nor a refusal tells an outsider that an embargoed tree
    exists."""
    trees = Tree.objects.all() if submitter is None else access.visible_trees(submitter)
    tree = trees.filter(name=name).first()
    if tree is not None:
        return tree
    if name == DEFAULT_TREE and not Tree.objects.filter(name=name).exists():
        return default_tree()  # the demo tree, registered on first use
    if submitter is not None:
        trees = access.submittable_trees(submitter)
    known = ", ".join(trees.order_by("name").values_list("name", flat=True)) or "none"
    which = "trees" if submitter is None else "trees you may submit to"
    raise SubmissionError("tree", f"no tree named {name!r}; {which}: {known}")


def _may_submit(submitter: AnyUser | None, tree: Tree) -> None:
    if submitter is None:
        return
    if not access.can_submit(submitter, tree):
        raise SubmissionError(
            "tree", f"you may not submit to tree {tree.name}: ask its admins for the "
            "submitter role",
        )  # fmt: skip


def _visibility(asked: str, tree: Tree) -> str:
    if not asked:
        return Comparison.Visibility.PUBLIC if tree.public else Comparison.Visibility.RESTRICTED
    if asked not in Comparison.Visibility.values:
        choices = ", ".join(Comparison.Visibility.values)
        raise SubmissionError("visibility", f"visibility must be one of {choices}, got {asked!r}")
    if asked == Comparison.Visibility.PUBLIC and not tree.public:
        # An embargoed tree's fixes must not leak by a submitter's choice.
        raise SubmissionError(
            "visibility", f"tree {tree.name} is not public: its comparisons are restricted"
        )
    return asked


def _target(name: str, arch: str) -> Target:
    target = Target.objects.select_related("base").filter(name=name).first()
    if target is None:
        raise SubmissionError("target", f"no target named {name!r}")
    if arch and target.arch != arch:
        raise SubmissionError("arch", f"target {target.name} is {target.arch}, not {arch}")
    if not target.enabled:
        raise SubmissionError("target", f"target {target.name} is disabled")
    if not target.active:  # a derived target's base
        raise SubmissionError(
            "target", f"target {target.name} is disabled: its base {target.base} is"
        )
    # Either would leave the comparison waiting in its queue forever.
    reason = pools.unserved_reason(target)  # a lab pool whose hosts are all disabled
    if not reason and settings.RCUBENCH_REQUIRE_SERVED_TARGETS:
        reason = serving.unserved_reason(target)
    if reason:
        raise SubmissionError("target", reason)
    return target


def _benchmarks(names: tuple[str, ...], target: Target) -> list[BenchmarkSpec]:
    if not names:
        raise SubmissionError("benchmarks", "no benchmark requested")
    if len(set(names)) != len(names):
        raise SubmissionError("benchmarks", "a benchmark is requested twice")
    specs = []
    for name in names:
        try:
            spec = get_benchmark(name).spec
        except KeyError as exc:
            raise SubmissionError("benchmarks", str(exc.args[0])) from None
        if target.arch not in spec.archs:
            raise SubmissionError("benchmarks", f"benchmark {name} does not run on {target.arch}")
        specs.append(spec)
    return specs


def _validate(req: ComparisonRequest, specs: list[BenchmarkSpec]) -> None:
    refs = (("base_ref", "base", req.base_ref), ("head_ref", "head", req.head_ref))
    for field, label, ref in refs:
        if field == "head_ref" and not ref:
            continue
        try:
            validate_rev(ref)
        except BadRefError as exc:
            raise SubmissionError(field, f"bad {label} ref: {exc}") from None
    if req.head_ref and req.series_mbox is not None:
        raise SubmissionError("head_ref", "give a head ref or a patch series, not both")
    if req.base_series_mbox is not None and req.series_mbox is None:
        raise SubmissionError("base_series", "a series for side A needs one for side B")
    if req.patch_fallback and req.series_mbox is None:
        raise SubmissionError(
            "patch_fallback", "fuzz was allowed, but there is no patch series to apply"
        )
    floor = 2 if settings.RCUBENCH_ALLOW_FEW_RUNS else defaults.MIN_RUNS
    if req.min_runs < floor:
        raise SubmissionError(
            "min_runs", f"at least {floor} runs per side are needed, got {req.min_runs}"
        )
    cap = settings.RCUBENCH_MAX_RUNS_PER_SIDE
    for field, label, runs in (("min_runs", "min runs", req.min_runs),
                               ("max_runs", "max runs", req.max_runs)):  # fmt: skip
        if runs > cap:
            raise SubmissionError(
                field, f"{label} ({runs}) is above the limit of {cap} runs per side"
            )
    if req.max_runs < req.min_runs:
        raise SubmissionError(
            "max_runs", f"max runs ({req.max_runs}) is below min runs ({req.min_runs})"
        )
    # Every comparison with NaN is false, so range checks let it through: a NaN threshold
    # made each regression "significant but small".
    numbers = (("alpha", "alpha", req.alpha), ("threshold_pct", "the threshold", req.threshold_pct))
    for field, label, number in numbers:
        if not math.isfinite(number):
            raise SubmissionError(field, f"{label} must be a finite number, got {number}")
    if not 0 < req.alpha < 0.5:
        raise SubmissionError("alpha", f"alpha must be in (0, 0.5), got {req.alpha}")
    if req.threshold_pct < 0:
        raise SubmissionError(
            "threshold_pct", f"the threshold must be >= 0, got {req.threshold_pct}"
        )
    if req.seed is not None and not 0 <= req.seed < SEED_LIMIT:
        raise SubmissionError("seed", f"the seed must be in [0, 2**62), got {req.seed}")
    extras = (("cmdline_a", "A", req.cmdline_a), ("cmdline_b", "B", req.cmdline_b))
    for field, side, extra in extras:
        if len(extra) > CMDLINE_MAX or not extra.isprintable():
            raise SubmissionError(
                field,
                f"side {side} command line must be printable, one line, at most {CMDLINE_MAX} "
                "characters",
            )
        try:  # an allow-list, and nothing the benchmarks set themselves
            check_extra(extra, specs)
        except CmdlineError as exc:
            raise SubmissionError(field, f"side {side} command line: {exc}") from None


def _series(mbox: bytes) -> PatchSeries:
    try:
        return store_series(mbox)
    except InvalidSeries as exc:
        raise SubmissionError("series", str(exc)) from None
