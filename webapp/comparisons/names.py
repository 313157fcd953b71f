"""Kernels named as people name them: tree and branch (a push's) or tag, the commit as a
Fixes: tag names it (12-digit sha and subject line), a series on top. One rule, read by the
summary's header (report, mail, exports), the list rows, the API and the command line.
The subject is recorded where a ref is resolved (submission's preflight, the build): no
reader asks git."""

import re
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Model, OuterRef, Subquery

from webapp.comparisons.models import Comparison
from webapp.trees.models import Patch, PatchSeries, Revision, Tree

_SHA_LIKE = re.compile(r"^[0-9a-f]{7,40}$")
# A series subject's tag, "[PATCH v3 0/7]" or "[RFC PATCH 0/2]": the name keeps its version.
_TAG = re.compile(r"^\s*\[([^\]]*)\]\s*")
_VERSION = re.compile(r"\b(v\d+)\b", re.I)


@dataclass(frozen=True)
class KernelName:
    """A kernel as people name it: where it comes from (tree, and the branch, tag or ref
    submitted; a push's branch), its commit as a Fixes: tag names one (12-digit sha and
    subject line), and a series applied on top. The full sha is `sha`, for a title
    attribute or once in a mail body. Before the ref is resolved `sha` is "" (unless the
    ref is a full sha), and revisions resolved before subjects were recorded have none.

    linux-watch/rcu/dev d89cb537e29d ("rcu: Fix a race")
    linux-6.12/v6.12 adc218676eef ("Linux 6.12") + 2 patches: rcu: shrink the GP
    """

    tree: str
    ref: str  # "" where the ref was the bare sha and no branch is known
    sha: str  # the commit the ref names (a series' base, not the commit it made)
    subject: str
    patches: int = 0  # of the series applied on top; 0 without one
    series: str = ""  # the series' subject (cover letter's, or the first patch's)

    @property
    def where(self) -> str:
        return f"{self.tree}/{self.ref}" if self.ref else self.tree

    @property
    def short_sha(self) -> str:
        return self.sha[:12]

    @property
    def commit(self) -> str:
        """`d89cb537e29d ("rcu: Fix a race")`, or as much of it as is known."""
        subject = f'("{self.subject}")' if self.subject else ""
        return " ".join(part for part in (self.short_sha, subject) if part)

    @property
    def on_top(self) -> str:
        """`+ 2 patches: <series subject>`, for a kernel with a series."""
        if not self.patches and not self.series:
            return ""
        count = (
            f"{self.patches} patch{'es' if self.patches != 1 else ''}" if self.patches else "series"
        )
        return f"+ {count}: {self.series}" if self.series else f"+ {count}"

    @property
    def text(self) -> str:
        return " ".join(part for part in (self.where, self.commit, self.on_top) if part)

    def __str__(self) -> str:
        return self.text


def name_kernel(
    tree: str,
    ref: str,
    *,
    sha: str = "",
    base_sha: str = "",
    subject: str = "",
    series: str | None = None,
    patches: int = 0,
    branch: str = "",
) -> KernelName:
    """The rule every reader names a kernel by (a revision's columns in, its name out): a
    push's `branch` over the ref it was submitted as (its sha), no ref where the ref is the
    commit's sha itself, the base commit of a series."""
    commit = base_sha if series is not None else (sha or base_sha)
    if not commit and re.fullmatch(r"[0-9a-f]{40}", ref):
        commit = ref  # a push's head, before anything resolved it
    shown = branch or ("" if _SHA_LIKE.match(ref) and commit.startswith(ref) else ref)
    return KernelName(tree=tree, ref=shown, sha=commit, subject=subject, patches=patches,
                      series=series_title(series or ""))  # fmt: skip


def series_title(subject: str) -> str:
    """A series' subject as its name shows it: without the "[PATCH ...]" tag, which the
    patch count replaces, but with the tag's version: "rcu: shrink the GP (v3)"."""
    tag = _TAG.match(subject)
    if tag is None or not subject[tag.end() :]:
        return subject
    version = _VERSION.search(tag.group(1))
    return subject[tag.end() :] + (f" ({version.group(1).lower()})" if version else "")


def name_annotations() -> dict[str, Subquery]:
    """What kernel_names reads beyond the revisions' own columns, as annotations of a
    Comparison queryset: scalar subqueries, each a primary-key lookup per row, rather than
    joins (webapp/reports/listing.py says why) or a query per row. tree_a_name,
    tree_b_name; series_a_subject, series_b_subject and patches_a, patches_b (None without
    a series); push_branch, the branch of the push whose head side B is (None: no push)."""
    branch = Comparison.objects.filter(pk=OuterRef("pk"), pushes__after=OuterRef("revision_b__ref"))
    return {
        "tree_a_name": _lookup(Tree, "revision_a__tree_id", "name"),
        "series_a_subject": _lookup(PatchSeries, "revision_a__series_id", "subject"),
        "patches_a": _patch_count("revision_a__series_id"),
        "tree_b_name": _lookup(Tree, "revision_b__tree_id", "name"),
        "series_b_subject": _lookup(PatchSeries, "revision_b__series_id", "subject"),
        "patches_b": _patch_count("revision_b__series_id"),
        "push_branch": Subquery(branch.order_by("pushes__pk").values("pushes__branch")[:1]),
    }


def _lookup(model: type[Model], ref: str, column: str) -> Subquery:
    return Subquery(model._default_manager.filter(pk=OuterRef(ref)).order_by().values(column)[:1])


def _patch_count(series_id: str) -> Subquery:
    patches = Patch.objects.filter(series_id=OuterRef(series_id)).order_by().values("series_id")
    return Subquery(patches.annotate(n=Count("pk")).values("n")[:1])


# The revisions' columns kernel_names reads: a queryset that defers columns keeps these.
NAME_COLUMNS = tuple(f"revision_{side}__{column}" for side in "ab"
                     for column in ("ref", "sha", "base_sha", "subject"))  # fmt: skip


def kernel_names(c: Comparison) -> tuple[KernelName, KernelName]:
    """Both sides' names (A, B): the revisions' columns, with name_annotations() where the
    queryset has them (else one query reads them)."""
    extra: dict[str, Any]
    if hasattr(c, "push_branch"):
        extra = {key: getattr(c, key) for key in name_annotations()}
    else:
        extra = dict(Comparison.objects.filter(pk=c.pk).values(**name_annotations()).get())
    return _name(c.revision_a, extra, "a"), _name(c.revision_b, extra, "b")


def _name(rev: Revision, extra: dict[str, Any], side: str) -> KernelName:
    return name_kernel(
        extra[f"tree_{side}_name"], rev.ref, sha=rev.sha, base_sha=rev.base_sha,
        subject=rev.subject, series=extra[f"series_{side}_subject"],
        patches=extra[f"patches_{side}"] or 0,
        branch=(extra["push_branch"] or "") if side == "b" else "",
    )  # fmt: skip
