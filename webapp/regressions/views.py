"""A regression's page (its facts, its history of states, the triage buttons) and a tree's
triage page. Thin: the moves and who may make them are webapp.regressions.services'."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from webapp import access
from webapp.regressions import services
from webapp.regressions.models import Regression, RegressionState
from webapp.regressions.services import Actor, TransitionRefused


def _visible(request: HttpRequest, pk: int) -> Regression:
    qs = Regression.objects.select_related("tree", "target", "comparison", "change_point",
                                           "duplicate_of")  # fmt: skip
    return access.get_visible(services.visible_regressions(request.user, qs), pk=pk)


@require_GET
def regression(request: HttpRequest, pk: int) -> HttpResponse:
    """404 for one the user may not see; the buttons for those who may triage it."""
    reg = _visible(request, pk)
    may = services.may_triage(request.user, reg)
    moves = services.BY_PERSON.get(RegressionState(reg.state), ()) if may else ()
    return render(request, "regressions/regression.html", {
        "reg": reg, "moves": moves, "may_triage": may,
        "transitions": reg.transitions.select_related("by"),
    })  # fmt: skip


@require_POST
def move(request: HttpRequest, pk: int) -> HttpResponse:
    """A triage button: 404 to those who may not see it, 403 to those who may not triage;
    a refused move goes back to the page with its reason, nothing stored."""
    reg = _visible(request, pk)
    back = HttpResponseRedirect(reverse("regressions:regression", args=[reg.pk]))
    dup = request.POST.get("duplicate_of", "").strip().lstrip("#")
    if dup and not dup.isdigit():
        messages.error(request, f"Not moved: duplicate of {dup!r}: give a regression number")
        return back
    try:
        services.transition(
            reg.pk, request.POST.get("state", ""), Actor(via="web", user=request.user),
            note=request.POST.get("note", ""), fixed_by=request.POST.get("fixed_by", ""),
            duplicate_of=int(dup) if dup else None,
        )  # fmt: skip
    except TransitionRefused as exc:
        messages.error(request, f"Not moved: {exc}")
        return back
    messages.success(request, f"Regression {reg.pk} is {request.POST.get('state')} now.")
    return back


@require_GET
def tree_triage(request: HttpRequest, name: str) -> HttpResponse:
    """The tree's open regressions by age, the recently closed, and the time to triage."""
    tree = access.get_visible(access.visible_trees(request.user), name=name)
    return render(request, "regressions/triage.html", {"t": services.triage(tree, request.user)})
