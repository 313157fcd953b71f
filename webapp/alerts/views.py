"""Subscriptions of the logged-in user, and the unsubscribe link of alert mails."""

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from webapp.alerts import services
from webapp.alerts.forms import SubscriptionForm


@login_required
@require_http_methods(["GET", "POST"])
def subscriptions(request: HttpRequest) -> HttpResponse:
    form = SubscriptionForm(request.user)
    if request.method == "POST":
        form = SubscriptionForm(request.user, request.POST)
        if form.is_valid():
            d = form.cleaned_data
            user = cast(User, request.user)
            services.subscribe(user, d["tree"], d["benchmark"], d["kinds"])
            if services.opt_out_of(user):
                messages.warning(request, f"Subscription added, but {user.email} has "
                                 "unsubscribed from all rcubench mail: nothing is mailed to it "
                                 "until you choose \u201cMail me again\u201d above.")  # fmt: skip
            else:
                messages.success(request, "subscription added")
            return redirect("alerts:subscriptions")
    context = {
        "form": form,
        "subscriptions": services.subscriptions_of(request.user),  # type: ignore[arg-type]
        "email": request.user.email,  # type: ignore[union-attr]
        "opt_out": services.opt_out_of(request.user),  # type: ignore[arg-type]
    }
    return render(request, "alerts/subscriptions.html", context)


@login_required
@require_POST
def undo_opt_out(request: HttpRequest) -> HttpResponse:
    """Mail the account's own address again after its unsubscribe link was used."""
    if services.undo_opt_out(request.user):  # type: ignore[arg-type]
        messages.success(request, f"{request.user.email} gets rcubench mail again")  # type: ignore[union-attr]
    else:
        messages.info(request, "your address had not unsubscribed: nothing to undo")
    return redirect("alerts:subscriptions")


@login_required
@require_POST
def unsubscribe_one(request: HttpRequest, pk: int) -> HttpResponse:
    if services.unsubscribe_one(request.user, pk):  # type: ignore[arg-type]
        messages.success(request, "subscription deleted")
    else:
        messages.error(request, "no such subscription")
    return redirect("alerts:subscriptions")


# CSRF-exempt: mail clients POST "List-Unsubscribe=One-Click" here without a session (RFC
# 8058); the signed token in the URL is the authority, and all it can do is stop mail.
@csrf_exempt
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    try:
        address = services.address_of_token(token)
    except signing.BadSignature:
        return render(request, "alerts/unsubscribe.html", {"bad": True}, status=400)
    done = False
    if request.method == "POST":
        services.opt_out(address)
        done = True
    return render(request, "alerts/unsubscribe.html", {"address": address, "done": done})
