"""API tokens of the logged-in user: create one with its scopes (shown once: only its hash
is stored), revoke one or all of them (webapp/accounts/tokens.py). The REST API's own
endpoints do the same from a session. And the password change, which ends every token
(signals.py)."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_http_methods, require_POST
from knox.settings import knox_settings

from webapp.accounts import tokens as service
from webapp.accounts.models import Scope


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    new_token = None
    if request.method == "POST":
        scopes = [Scope.READ, Scope.SUBMIT] if request.POST.get("submit") else [Scope.READ]
        try:
            _, new_token = service.create_token(request.user, scopes)  # type: ignore[arg-type]
        except service.TokenLimit as exc:
            messages.error(request, str(exc))
    context = {
        "tokens": service.tokens(request.user),  # type: ignore[arg-type]
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
    if service.revoke_token(request.user, token_key):  # type: ignore[arg-type]
        messages.success(request, f"token {token_key}… revoked")
    else:
        messages.error(request, "no such token")
    return redirect("api-tokens")


@login_required
@require_POST
def revoke_all(request: HttpRequest) -> HttpResponse:
    revoked = service.revoke_all(request.user, reason="revoked by the owner")  # type: ignore[arg-type]
    messages.success(request, f"{revoked} token{'' if revoked == 1 else 's'} revoked")
    return redirect("api-tokens")


class PasswordChange(auth_views.PasswordChangeView):
    """Django's password change (the old password, then the new one twice, validated); the
    session stays logged in, every API token ends."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("api-tokens")

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        response = super().form_valid(form)
        messages.success(self.request, "password changed: your API tokens were revoked")
        return response
