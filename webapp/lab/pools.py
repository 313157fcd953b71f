"""Whether a lab pool can take runs, and whose kernels it may run, for the submission
service and the lab run service (no ssh, no engine).

A kernel under test is root on a lab host's real hardware: it can write the host's disk
(the known-good OS) and firmware, and read whatever is left on it. So a pool takes either
trusted kernels only (`LabPool.Trust.TRUSTED`, the default): pushes of watched trees, and
refs (never a patch series) that the tree's admins, staff or the operator's own command
line submit; or any submitter's, when it reprovisions its hosts after every run
(`REPROVISIONED`).
"""

from django.contrib.auth.models import AnonymousUser

from webapp import access
from webapp.access import AnyUser
from webapp.comparisons.models import Comparison, Target
from webapp.lab.models import LabHost, LabPool
from webapp.trees.models import Tree

# Submitted by no account: the operator's command line on the server, or a signed push.
_SERVER_SIDE = (Comparison.Trigger.CLI, Comparison.Trigger.WEBHOOK)


def unserved_reason(target: Target) -> str | None:
    """Why a lab pool cannot take runs (no host, or every host disabled), or None; None for
    a target that is not a lab pool."""
    if not target.is_lab:
        return None
    states = set(LabHost.objects.filter(target=target).values_list("state", flat=True))
    if not states:
        return f"lab pool {target.name} has no hosts"
    if states == {LabHost.State.DISABLED}:
        return f"every host of lab pool {target.name} is disabled"
    return None


def policy(target: Target) -> LabPool:
    """The pool's policy; trusted-only for a lab Target without one (nothing stored)."""
    return LabPool.objects.filter(target=target).first() or LabPool(target=target)


def refusal(
    target: Target, tree: Tree, *, trigger: str, submitter: AnyUser | None, series: bool
) -> str | None:
    """Why `target` may not run this comparison's kernels, or None. `submitter` is the
    submitting account (None: none, as for the operator's command line and pushes)."""
    if not target.is_lab or not policy(target).trusted_only:
        return None
    if series:
        why = "a patch series is its submitter's code"
    elif submitter is None:  # the operator's command line, or a signed push of the tree
        if trigger in _SERVER_SIDE:
            return None
        why = "it has no submitter"
    elif access.is_tree_admin(submitter, tree):
        return None
    else:
        why = f"its submitter is not an admin of tree {tree.name}"
    return (
        f"lab pool {target.name} runs trusted kernels only (pushes of watched trees, and refs "
        f"that the tree's admins submit), and {why}: choose a VM target, or a lab pool that "
        "reprovisions its hosts"
    )


def comparison_refusal(comparison: Comparison) -> str | None:
    """`refusal` for a stored comparison, when its run is about to take a host: a pool
    made trusted-only after the comparison was queued does not run it."""
    rev_a, rev_b = comparison.revision_a, comparison.revision_b
    submitter: AnyUser | None = comparison.submitted_by
    if submitter is None and comparison.trigger not in _SERVER_SIDE:
        submitter = AnonymousUser()  # its account is gone: trusted no more
    return refusal(
        comparison.target, rev_a.tree, trigger=comparison.trigger, submitter=submitter,
        series=rev_a.series_id is not None or rev_b.series_id is not None,
    )  # fmt: skip
