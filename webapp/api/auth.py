"""Token authentication: knox's hashed, per-user, revocable tokens, hardened against a
header that is not a token at all (any bytes a client sends are a 401, never a 500); and
what a token may do: its scopes (webapp/accounts/tokens.py), and never manage tokens."""

import binascii
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions, permissions

from webapp.accounts import tokens
from webapp.accounts.models import Scope

# knox tokens: an optional prefix of up to 10 characters and 64 hex digits.
MAX_TOKEN_LENGTH = 10 + 64


class TokenAuthentication(KnoxTokenAuthentication):
    """`Authorization: Token <token>`."""

    def authenticate_credentials(self, token: bytes) -> Any:
        if len(token) > MAX_TOKEN_LENGTH:
            raise exceptions.AuthenticationFailed("Invalid token.")
        try:
            token.decode("ascii")
        except (UnicodeDecodeError, binascii.Error):
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        return super().authenticate_credentials(token)


def _by_token(request: Any) -> bool:
    return isinstance(request.successful_authenticator, KnoxTokenAuthentication)


class TokenScopes(permissions.BasePermission):
    """A request made with a token needs the token's scope for it: read to read, submit for
    anything else (submit, cancel). Sessions are the account itself. A 403 names the scope."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not _by_token(request):
            return True
        needed = Scope.READ if request.method in permissions.SAFE_METHODS else Scope.SUBMIT
        if needed in tokens.scopes_of(request.auth):
            return True
        self.message = (
            f"this token lacks the '{needed}' scope: create a token with it at /accounts/tokens/"
        )
        return False


class ManagedBySession(permissions.BasePermission):
    """Tokens are created and revoked from a logged-in session only: a stolen token can
    neither mint a spare that outlives it nor revoke its owner's tokens. Listing is reading."""

    message = (
        "tokens are created and revoked from a logged-in session (/accounts/tokens/), "
        "not with a token"
    )

    def has_permission(self, request: Any, view: Any) -> bool:
        return request.method in permissions.SAFE_METHODS or not _by_token(request)


class TokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes it."""

    target_class = "webapp.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Token-based authentication: 'Token <token>' (rcb_...), with "
            "scopes read (GET) and submit (submit, cancel).",
        }
