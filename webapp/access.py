"""Who may see and do what: the one place every page, download, API endpoint and mail asks.

Visibility (ARCHITECTURE.md, trust boundaries): a comparison is public or restricted to its
tree's members. Staff see everything. Anyone else asking for a comparison they may not see
gets 404, never 403, so an id leaks nothing; the same holds for its runs, consoles, series
mbox and exports. Roles are per tree (`TreeMembership`): submitters may submit against the
tree; tree admins may also cancel any of its comparisons. A submitter may cancel their own.
"""

from typing import TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, Model, OuterRef, Q, QuerySet
from django.http import Http404

from webapp.comparisons.models import Comparison, Run
from webapp.trees.models import PatchSeries, Tree, TreeMembership

AnyUser = AbstractBaseUser | AnonymousUser
M = TypeVar("M", bound=Model)


def _is_staff(user: AnyUser) -> bool:
    return bool(user.is_authenticated and getattr(user, "is_staff", False))


def _visible_q(user: AnyUser, prefix: str = "") -> Q:
    """The condition on Comparison rows (reached through `prefix`, e.g. "comparison__")."""
    public = Q(**{f"{prefix}visibility": Comparison.Visibility.PUBLIC})
    if not user.is_authenticated:
        return public
    member = TreeMembership.objects.filter(
        user_id=user.pk, tree_id=OuterRef(f"{prefix}revision_a__tree_id")
    )
    return public | Q(Exists(member))


def visible_comparisons(
    user: AnyUser, qs: QuerySet[Comparison] | None = None
) -> QuerySet[Comparison]:
    """The comparisons `user` may see (of `qs`, default all)."""
    qs = Comparison.objects.all() if qs is None else qs
    return qs if _is_staff(user) else qs.filter(_visible_q(user))


def scope_key(user: AnyUser) -> str:
    """A cache key part for what `user` sees: anonymous users share one, anyone else has
    their own (their memberships decide)."""
    if not user.is_authenticated:
        return "anonymous"
    return f"{'staff' if _is_staff(user) else 'user'}:{user.pk}"


def visible_runs(user: AnyUser, qs: QuerySet[Run] | None = None) -> QuerySet[Run]:
    qs = Run.objects.all() if qs is None else qs
    return qs if _is_staff(user) else qs.filter(_visible_q(user, "comparison__"))


def visible_series(user: AnyUser, qs: QuerySet[PatchSeries] | None = None) -> QuerySet[PatchSeries]:
    """A series is visible where a comparison the user sees tests it."""
    qs = PatchSeries.objects.all() if qs is None else qs
    if _is_staff(user):
        return qs
    seen = visible_comparisons(user).filter(
        Q(revision_b__series_id=OuterRef("pk")) | Q(revision_a__series_id=OuterRef("pk"))
    )
    return qs.filter(Exists(seen))


def visible_trees(user: AnyUser, qs: QuerySet[Tree] | None = None) -> QuerySet[Tree]:
    """The trees whose page (refs under test, pushes, history) `user` may see: public trees,
    and the trees they are a member of; staff all."""
    qs = Tree.objects.all() if qs is None else qs
    if _is_staff(user):
        return qs
    if not user.is_authenticated:
        return qs.filter(public=True)
    member = TreeMembership.objects.filter(user_id=user.pk, tree_id=OuterRef("pk"))
    return qs.filter(Q(public=True) | Q(Exists(member)))


def sees_all_of(user: AnyUser, tree: Tree) -> bool:
    """Whether `user` sees every comparison of `tree`, restricted ones too (staff and the
    tree's members); everyone else sees its public ones only. What is derived from a tree's
    comparisons together (its history's change points) comes in these two versions."""
    return _is_staff(user) or role(user, tree.pk) is not None


def is_tree_admin(user: AnyUser, tree: Tree) -> bool:
    """Staff and the tree's admins: they edit its watch policy and read its deliveries."""
    return _is_staff(user) or role(user, tree.pk) == TreeMembership.Role.ADMIN


def get_visible(qs: QuerySet[M], **lookup: object) -> M:
    """One row of an already visibility-filtered queryset, or 404."""
    obj = qs.filter(**lookup).first()
    if obj is None:
        raise Http404("no such object")
    return obj


def can_view(user: AnyUser, comparison: Comparison) -> bool:
    return visible_comparisons(user).filter(pk=comparison.pk).exists()


def role(user: AnyUser, tree_id: int) -> str | None:
    """The user's role on the tree, or None."""
    if not user.is_authenticated:
        return None
    m = TreeMembership.objects.filter(user_id=user.pk, tree_id=tree_id).first()
    return m.role if m else None


def submittable_trees(user: AnyUser) -> QuerySet[Tree]:
    """The trees `user` may submit against: staff all, others those they hold a role on."""
    if _is_staff(user):
        return Tree.objects.all()
    if not user.is_authenticated:
        return Tree.objects.none()
    return Tree.objects.filter(memberships__user_id=user.pk).distinct()


def can_submit(user: AnyUser, tree: Tree) -> bool:
    return _is_staff(user) or role(user, tree.pk) is not None


def can_cancel(user: AnyUser, comparison: Comparison) -> bool:
    """Staff, the tree's admins and the comparison's own submitter."""
    if not user.is_authenticated:
        return False
    if _is_staff(user) or comparison.submitted_by_id == user.pk:
        return True
    return role(user, comparison.revision_a.tree_id) == TreeMembership.Role.ADMIN
