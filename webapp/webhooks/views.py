"""Thin views: the webhook endpoints hand the request to services.receive_delivery; the
delivery log is a page for the tree's admins and staff (404 to everyone else)."""

import io

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from webapp.webhooks import services
from webapp.webhooks.models import Delivery


def _hook(request: HttpRequest, tree: str, source: str) -> HttpResponse:
    if request.method != "POST":
        response = JsonResponse({"detail": "webhooks are POST only"}, status=405)
        response["Allow"] = "POST"
        return response
    # The body is read (capped) before the tree is looked up, so that an oversized one is
    # 413 whether or not the tree exists.
    length = request.META.get("CONTENT_LENGTH")
    try:
        body = services.read_body(length, request.read)
    except services.Refused as exc:
        return JsonResponse({"detail": exc.detail}, status=exc.status)
    reply = services.receive_delivery(source, tree, request.headers, length,
                                      io.BytesIO(body).read)  # fmt: skip
    if reply.status in (403, 404):
        # Unknown tree, no secret, bad signature, stale timestamp: one answer, so that an
        # outsider cannot tell a tree that exists (an embargoed one too) from one that does
        # not. The precise reason is in the `webhook refused` log line.
        return JsonResponse(NOT_ACCEPTED, status=403)
    return JsonResponse(reply.body, status=reply.status)


NOT_ACCEPTED = {
    "detail": "not accepted: no such tree, or no valid signature with its webhook secret "
    "(the reason is in the server's log; see docs/webhooks.md)"
}


# CSRF-exempt: senders authenticate by the body's signature, never by a session cookie.
@csrf_exempt
def github(request: HttpRequest, tree: str) -> HttpResponse:
    return _hook(request, tree, Delivery.Source.GITHUB)


@csrf_exempt
def gitlab(request: HttpRequest, tree: str) -> HttpResponse:
    return _hook(request, tree, Delivery.Source.GITLAB)


@csrf_exempt
def git(request: HttpRequest, tree: str) -> HttpResponse:
    return _hook(request, tree, Delivery.Source.GIT)


@require_GET
def deliveries(request: HttpRequest, tree: str) -> HttpResponse:
    """The tree's deliveries, newest first, for its admins and staff."""
    t, page = services.delivery_log(request.user, tree, request.GET.get("page"))
    return render(request, "webhooks/deliveries.html", {"tree": t, "page": page})
