"""Thin views: the webhook endpoints hand the request to services.receive_delivery; the
delivery log is a page for the tree's admins and staff (404 to everyone else)."""

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
    reply = services.receive_delivery(
        source, tree, request.headers, request.META.get("CONTENT_LENGTH"), request.read
    )
    return JsonResponse(reply.body, status=reply.status)


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
