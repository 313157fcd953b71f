"""What the REST API reads and does, as functions over the user asking (views and
serializers stay thin). Every query of a comparison, its runs, measurements and verdicts
goes through webapp.access: what a user may not see is 404, as on the pages."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404
from rest_framework import serializers

from benchmarks import registry
from benchmarks.cmdline import params
from webapp import access, logs
from webapp.access import AnyUser
from webapp.accounts import tokens as tokens_service
from webapp.analysis.models import MetricVerdict
from webapp.bisections import services as bisection_services
from webapp.bisections.models import Bisection
from webapp.comparisons import diagnostic_runs
from webapp.comparisons.models import NOT_DERIVED, Comparison, Measurement, Run, Target
from webapp.comparisons.names import name_annotations
from webapp.comparisons.reproducer import public_url
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.memo import LruMemo
from webapp.trees.models import Tree, TreeMembership

log = logs.get(__name__)
PK_MAX = 2**63 - 1  # bigint: a larger id matches nothing (and must not reach the database)


def _pk(pk: int) -> int:
    if not 0 < pk <= PK_MAX:
        raise Http404("no such object")
    return pk


# --- trees, targets, benchmarks -------------------------------------------------------


def trees(user: AnyUser) -> QuerySet[Tree]:
    """The trees `user` may see (access.visible_trees: a tree that is not public is its
    members' and staff's only, name and description included; to anyone else it is 404
    as an unknown name is), each with `user_role`, the user's role on it (None: no role)."""
    qs = access.visible_trees(user, Tree.objects.order_by("name"))
    if not user.is_authenticated:
        return qs.annotate(user_role=Subquery(TreeMembership.objects.none().values("role")))
    role = TreeMembership.objects.filter(user_id=user.pk, tree_id=OuterRef("pk")).values("role")
    return qs.annotate(user_role=Subquery(role[:1]))


def can_submit(user: AnyUser, tree: Tree) -> bool:
    """As access.can_submit, from the annotated role (no query per tree)."""
    if not user.is_authenticated:
        return False
    return bool(getattr(user, "is_staff", False) or getattr(tree, "user_role", None))


def targets() -> QuerySet[Target]:
    """Targets with their own queue: those derived for sweeps are the sweeps' detail."""
    return Target.objects.filter(NOT_DERIVED).order_by("name")


@dataclass(frozen=True)
class MetricInfo:
    name: str
    unit: str
    direction: str  # which way is better: lower or higher
    kind: str  # samples (many per run) or value (one per run)
    primary: bool
    threshold: float | None
    threshold_is_absolute: bool


@dataclass(frozen=True)
class ParamInfo:
    name: str
    value: str | None


@dataclass(frozen=True)
class BenchmarkInfo:
    name: str
    description: str
    archs: list[str]
    metrics: list[MetricInfo]
    parameters: list[ParamInfo]  # the kernel command line the benchmark sets
    kconfig: list[str]
    guest_command: str
    notes: str
    # A preset (benchmarks/presets.py): the benchmark it is a variant of, its name there,
    # and the parameters it sets over that benchmark's; None for a benchmark of its own.
    preset_of: str | None
    preset: str | None
    preset_parameters: list[ParamInfo] | None


def benchmarks() -> list[BenchmarkInfo]:
    """Every benchmark of the registry, in its order (each preset after its base)."""
    return [
        BenchmarkInfo(
            name=s.name, description=s.description, archs=list(s.archs),
            metrics=[MetricInfo(m.name, m.unit, m.better.value, m.kind.value, m.primary,
                                m.threshold, m.threshold_is_absolute) for m in s.metrics],
            parameters=[ParamInfo(p.name, p.value) for p in params(s.cmdline)],
            kconfig=list(s.kconfig), guest_command=s.guest_command, notes=s.notes,
            preset_of=s.base or None, preset=s.preset or None,
            preset_parameters=[ParamInfo(p.name, p.value)
                               for p in params(registry.preset_params(s))] if s.base else None,
        )
        for s in (b.spec for b in registry.BENCHMARKS.values())
    ]  # fmt: skip


# --- comparisons ----------------------------------------------------------------------


def comparisons(user: AnyUser) -> QuerySet[Comparison]:
    """The comparisons `user` may see, newest first, with what the API shows joined in."""
    qs = Comparison.objects.select_related(
        "revision_a__tree", "revision_a__series", "revision_b__series", "target",
        "submitted_by", "build_a", "build_b",
    ).defer(
        "revision_a__series__mbox", "revision_b__series__mbox", "build_a__log", "build_b__log"
    ).annotate(**name_annotations()).order_by("-created_at", "-pk")  # fmt: skip
    return access.visible_comparisons(user, qs)


def comparison_list(user: AnyUser) -> QuerySet[Comparison]:
    """The comparisons `user` may see, newest first (the comparison_newest_first index: a
    page reads its rows in order, no sort), with what the list's serializer shows joined in
    and nothing more: not the builds (the detail's progress reads them) nor side A's series.
    Every table joined costs PostgreSQL planning time at each request (~7 ms for the nine
    of `comparisons`, ~2 ms for these seven)."""
    qs = (
        Comparison.objects.select_related(
            "revision_a__tree", "revision_b__series", "target", "submitted_by"
        )
        .defer("revision_b__series__mbox")
        .annotate(**name_annotations())
        .order_by("-created_at", "-pk")
    )
    return access.visible_comparisons(user, qs)


# The list's rows, serialized, kept per process by every value they show: under load the
# serializer took ~7 ms of a ~20 ms page of 50 rows, and most rows show the same at every
# request. The key is the row's values of every field the serializer reads (row_columns;
# the URL fields are computed from ids in it), so a row is served from memory only when
# nothing it shows changed: a new state, a renamed tree or an edited series makes a new
# key. Least recently used entries go first.
_row_memo: LruMemo[dict[str, Any]] = LruMemo()


_columns: dict[type[serializers.Serializer[Any]], tuple[str, ...]] = {}


def _columns_of(serializer: type[serializers.Serializer[Any]]) -> tuple[str, ...]:
    """row_columns of a serializer class, worked out once a process (not on each page)."""
    if serializer not in _columns:
        _columns[serializer] = tuple(row_columns(serializer()))
    return _columns[serializer]


def row_columns(serializer: serializers.Serializer[Any], prefix: str = "") -> list[str]:
    """The model paths (ORM lookups) a serializer's fields read, nested ones included;
    SerializerMethodFields (source "*") are left out: theirs must come from these."""
    out = []
    for f in serializer.fields.values():
        if f.source == "*":
            continue
        path = prefix + f.source.replace(".", "__")
        if isinstance(f, serializers.BaseSerializer):
            assert isinstance(f, serializers.Serializer)  # noqa: S101 - not a list of them
            out += row_columns(f, f"{path}__")
        else:
            out.append(path)
    return out


def _hashable(values: tuple[Any, ...]) -> tuple[object, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in values)


def comparison_rows(
    pks: list[int],
    visible: QuerySet[Comparison],
    serializer: type[serializers.Serializer[Any]],
    context: dict[str, Any],
) -> list[dict[str, Any]]:
    """The comparisons `pks` (of `visible`, in that order) as `serializer` shows them: their
    shown values read in one query, the rows not in the memo serialized from one more."""
    shown = visible.filter(pk__in=pks).order_by().values_list("pk", *_columns_of(serializer))
    base = public_url()  # the URL fields' prefix (a setting): part of what a row shows
    keys = {row[0]: (base, *_hashable(row)) for row in shown}
    out = {pk: hit for pk, key in keys.items() if (hit := _row_memo.get(key)) is not None}
    missing = [pk for pk in keys if pk not in out]
    if missing:
        for row in serializer(visible.filter(pk__in=missing), many=True, context=context).data:
            out[row["id"]] = dict(row)
            _row_memo.put(keys[row["id"]], out[row["id"]])
    return [out[pk] for pk in pks if pk in out]


def comparison(user: AnyUser, pk: int) -> Comparison:
    return access.get_visible(comparisons(user), pk=_pk(pk))


def check_submitter(user: AbstractBaseUser, tree_name: str) -> None:
    """Refuse (SubmissionError on "tree") an account that may not submit to the tree before
    anything costly is done for it (a lore fetch holds a web worker up to a minute).
    submit_comparison checks again; a tree that does not exist is refused alike, except to
    staff (the service registers the default tree on first use)."""
    tree = Tree.objects.filter(name=tree_name).first()
    if tree is None and getattr(user, "is_staff", False):
        return  # the submission service names what is wrong, or registers the default tree
    if tree is None or not access.can_submit(user, tree):
        log.info("api submit refused early", user=user.get_username(), tree=tree_name[:80])
        raise SubmissionError(
            "tree", f"you may not submit to tree {tree_name}: ask its admins for the "
            "submitter role",
        )  # fmt: skip


def comparison_request(
    user: AbstractBaseUser, fields: dict[str, Any], mbox: bytes | None
) -> ComparisonRequest:
    """The request `user` makes with a submission's validated fields (those of
    serializers.ComparisonRequestSerializer) and the series' mbox: one place for the
    comparison and the sweep endpoints (webapp/api/sweeps.py), so both ask alike."""
    return ComparisonRequest(
        tree=fields["tree"], base_ref=fields["base_ref"], head_ref=fields["head_ref"],
        series_mbox=mbox, patch_fallback=fields["patch_fallback"],
        benchmarks=tuple(fields["benchmarks"]), target=fields["target"], arch=fields["arch"],
        cmdline_a=fields["cmdline_a"], cmdline_b=fields["cmdline_b"],
        min_runs=fields["min_runs"], max_runs=fields["max_runs"], alpha=fields["alpha"],
        threshold_pct=fields["threshold_pct"], seed=fields["seed"],
        visibility=fields["visibility"], trigger=Comparison.Trigger.API,
        requested_by=f"api:{user.get_username()}", submitted_by=user.pk,
    )  # fmt: skip


def submit(user: AbstractBaseUser, fields: dict[str, Any], mbox: bytes | None) -> Comparison:
    """Submit for `user` through the one submission service (SubmissionError names the
    field at fault)."""
    return submit_comparison(comparison_request(user, fields, mbox))


DiagnosisRefused = diagnostic_runs.DiagnosisRefused


def diagnose(user: AnyUser, comparison_pk: int, per_side: int | None) -> int:
    """Schedule the comparison's traced diagnostic runs for `user`, who may do so where they
    may cancel it (access.can_cancel): 404 where they may not see it, PermissionDenied
    where they may not, DiagnosisRefused (diagnostic_runs.diagnose) where it cannot be traced.
    Returns the runs added."""
    return diagnostic_runs.diagnose_for(user, comparison_pk, per_side, via="through the API")


# --- runs, measurements, verdicts -----------------------------------------------------


def runs(user: AnyUser, comparison_pk: int) -> QuerySet[Run]:
    """The runs of a comparison the user sees (else Http404), in run order."""
    c = comparison(user, comparison_pk)
    return (
        Run.objects.filter(comparison=c).defer("console_log", "trace_log").order_by("order", "pk")
    )


def run(user: AnyUser, pk: int) -> Run:
    return access.get_visible(
        access.visible_runs(user, Run.objects.defer("console_log", "trace_log")), pk=_pk(pk)
    )


def measurements(user: AnyUser, run_pk: int) -> QuerySet[Measurement]:
    r = run(user, run_pk)
    return Measurement.objects.filter(run=r).order_by("benchmark", "metric", "pk")


def verdicts(user: AnyUser, comparison_pk: int) -> QuerySet[MetricVerdict]:
    c = comparison(user, comparison_pk)
    return MetricVerdict.objects.filter(comparison=c).order_by(
        "benchmark", "-is_primary", "metric", "statistic", "pk"
    )


# --- bisections -------------------------------------------------------------------------

BisectionRefused = bisection_services.BisectionRefused


def bisections(user: AnyUser) -> QuerySet[Bisection]:
    """The bisections `user` may see (those of comparisons they see), newest first, with
    what the API shows joined in."""
    qs = bisection_services.visible(user).select_related("comparison", "requested_by")
    return qs.order_by("-created_at", "-pk")


def bisection(user: AnyUser, pk: int) -> Bisection:
    return access.get_visible(bisections(user), pk=_pk(pk))


def start_bisection(
    user: AnyUser, comparison_pk: int, fields: dict[str, Any]
) -> tuple[Bisection, bool]:
    """Start (or join) a bisection for `user` (bisections.services.start: BisectionRefused,
    PermissionDenied, Http404); whether it was created."""
    named = (fields["benchmark"], fields["metric"], fields["statistic"])
    return bisection_services.start(
        _pk(comparison_pk), mode=fields["mode"], statistic=named if all(named) else None,
        user=user, trigger=Bisection.Trigger.API,
    )  # fmt: skip


def cancel_bisection(user: AnyUser, pk: int) -> tuple[Bisection, bool]:
    """bisections.services.cancel_for (404, PermissionDenied); whether this ended it."""
    return bisection_services.cancel_for(user, _pk(pk))


# --- tokens (webapp/accounts/tokens.py: the account's own service) ---------------------

TokenLimit = tokens_service.TokenLimit
UnknownScope = tokens_service.UnknownScope
normalize_scopes = tokens_service.normalize_scopes
tokens = tokens_service.tokens
create_token = tokens_service.create_token
revoke_token = tokens_service.revoke_token
revoke_all = tokens_service.revoke_all
