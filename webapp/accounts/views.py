"""API tokens of the logged-in user: create one (shown once: only its hash is stored) and
revoke any of them. The REST API's own endpoints do the same (webapp/api)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from knox.settings import knox_settings

from webapp.api import services


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    new_token = None
    if request.method == "POST":
        try:
            _, new_token = services.create_token(request.user)  # type: ignore[arg-type]
        except services.TokenLimit as exc:
            messages.error(request, str(exc))
    context = {
        "tokens": services.tokens(request.user),  # type: ignore[arg-type]
        "new_token": new_token,
        "ttl_days": knox_settings.TOKEN_TTL.days if knox_settings.TOKEN_TTL else None,
        "api_root": "/api/v1/",
    }
    response = render(request, "accounts/tokens.html", context)
    if new_token:
        response["Cache-Control"] = "no-store"  # the token must not stay in any cache
    return response


@login_required
@require_POST
def revoke_token(request: HttpRequest, token_key: str) -> HttpResponse:
    if services.revoke_token(request.user, token_key):  # type: ignore[arg-type]
        messages.success(request, f"token {token_key}… revoked")
    else:
        messages.error(request, "no such token")
    return redirect("api-tokens")
