"""API tokens of an account: knox's (stored hashed, per user, expiring) with the scopes
rcubench grants them (accounts.TokenGrant). Created and revoked by the account's owner from
a logged-in session (the page /accounts/tokens/ or the API with the session); a token never
manages tokens. Every token of an account ends when its password changes (signals.py)."""

from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import knox_settings

from webapp import logs
from webapp.accounts.models import Scope, TokenGrant

log = logs.get(__name__)

ALL_SCOPES = tuple(Scope.values)


class TokenLimit(Exception):
    pass


class UnknownScope(ValueError):
    pass


def normalize_scopes(scopes: Iterable[str]) -> list[str]:
    """`scopes` with read added, in the canonical order; UnknownScope names a bad one."""
    asked = set(scopes)
    unknown = sorted(asked - set(ALL_SCOPES), key=str)
    if unknown:
        raise UnknownScope(f"unknown scope {unknown[0]!r}: the scopes are {', '.join(ALL_SCOPES)}")
    return [s for s in ALL_SCOPES if s in asked | {Scope.READ}]


def tokens(user: AbstractBaseUser) -> QuerySet[AuthToken]:
    """The user's tokens, newest first, with their grants (knox keeps only their digest and
    first characters)."""
    return AuthToken.objects.filter(user_id=user.pk).select_related("grant").order_by("-created")


def scopes_of(token: AuthToken) -> list[str]:
    """What `token` may do; read only without a grant row."""
    grant = TokenGrant.objects.filter(token=token).values_list("scopes", flat=True).first()
    return list(grant) if grant else [Scope.READ]


def create_token(
    user: AbstractBaseUser, scopes: Iterable[str] = (Scope.READ,)
) -> tuple[AuthToken, str]:
    """A new token for `user` with `scopes` (read is implied): (its row, the token itself,
    which is not stored and can be shown only now). TokenLimit when the user holds the most
    tokens allowed, UnknownScope for a scope that does not exist; nothing is stored then."""
    granted = normalize_scopes(scopes)
    limit = knox_settings.TOKEN_LIMIT_PER_USER
    live = tokens(user).filter(Q(expiry__isnull=True) | Q(expiry__gt=timezone.now()))
    if limit is not None and live.count() >= limit:
        raise TokenLimit(f"you hold {limit} tokens, the most allowed: revoke one first")
    with transaction.atomic():
        instance, token = AuthToken.objects.create(user=user, prefix=knox_settings.TOKEN_PREFIX)
        TokenGrant.objects.create(token=instance, scopes=granted)
    log.info("api token created", user=user.pk, token_key=instance.token_key, scopes=granted)
    return instance, token


def revoke_token(user: AbstractBaseUser, token_key: str) -> bool:
    """Revoke the user's token that starts with `token_key`; False if there is none."""
    deleted, _ = AuthToken.objects.filter(user_id=user.pk, token_key=token_key).delete()
    if deleted:
        log.info("api token revoked", user=user.pk, token_key=token_key)
    return deleted > 0


def revoke_all(user: AbstractBaseUser, reason: str) -> int:
    """Revoke every token of `user`; how many there were."""
    _, per_model = AuthToken.objects.filter(user_id=user.pk).delete()
    revoked = per_model.get(AuthToken._meta.label, 0)
    log.info("api tokens revoked", user=user.pk, count=revoked, reason=reason)
    return revoked
