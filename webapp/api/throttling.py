"""Request rates per client address (anonymous) and per account, counted in the cache every
web process shares (settings.CACHES["api"]: Redis). The rates are read from the settings
at each request, so a test can lower them; an unreachable cache lets requests through
rather than failing them (the counters are a courtesy, the data is in PostgreSQL)."""

from typing import Any

from django.core.cache import BaseCache, caches
from redis.exceptions import RedisError
from rest_framework import throttling
from rest_framework.settings import api_settings

from webapp import logs

log = logs.get(__name__)
CACHE_ALIAS = "api"


class _SharedCache:
    """The throttles' cache, looked up per request (tests swap the settings)."""

    def __get__(self, obj: object, objtype: type | None = None) -> BaseCache:
        return caches[CACHE_ALIAS]


class _Rates:
    cache = _SharedCache()

    def get_rate(self) -> str | None:
        scope = getattr(self, "scope", None)
        return api_settings.DEFAULT_THROTTLE_RATES.get(scope) if scope else None

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return bool(super().allow_request(request, view))  # type: ignore[misc]
        except (RedisError, OSError) as exc:
            log.warning("api throttle cache unreachable", error=str(exc))
            return True


class AnonThrottle(_Rates, throttling.AnonRateThrottle):
    """Per client address, at the "anon" rate (DRF's __init__ reads it via _Rates)."""


class UserThrottle(_Rates, throttling.UserRateThrottle):
    """Per account, at the "user" rate."""


class ScopedThrottle(_Rates, throttling.ScopedRateThrottle):
    """Views with a `throttle_scope` ("submit", "token"), counted per account."""
