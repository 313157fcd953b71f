"""Token authentication: knox's hashed, per-user, revocable tokens, hardened against a
header that is not a token at all (any bytes a client sends are a 401, never a 500)."""

import binascii
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import authentication, exceptions

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


class BasicAuthentication(authentication.BasicAuthentication):
    """User name and password (only where a token is created), behind django-axes: after
    AXES_FAILURE_LIMIT failures a name is locked out from that address, and says so."""

    def authenticate_credentials(self, userid: str, password: str, request: Any = None) -> Any:
        try:
            return super().authenticate_credentials(userid, password, request)
        except exceptions.AuthenticationFailed:
            if getattr(request, "axes_locked_out", False):
                raise exceptions.AuthenticationFailed(
                    "too many failed attempts: logging in as this user from this address is "
                    f"locked for {settings.AXES_COOLOFF_TIME:g} h"
                ) from None
            raise


class BasicScheme(OpenApiAuthenticationExtension):
    target_class = "webapp.api.auth.BasicAuthentication"
    name = "basicAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "basic"}


class TokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes it."""

    target_class = "webapp.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Token-based authentication: 'Token <token>' (rcb_...).",
        }
