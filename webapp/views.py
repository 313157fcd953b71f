"""Project-level views."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from webapp.health import cached_checks


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 with every component ok; 503 naming the failed ones otherwise.

    Anyone (probes, load balancers) sees only whether each component is reachable; versions,
    addresses and error texts name hosts and software, so only logged-in staff see them.
    The probes' answer is shared for a few seconds (webapp/health.py:cached_checks).
    """
    checks = cached_checks()
    failed = sorted(name for name, check in checks.items() if not check.ok)
    detailed = request.user.is_authenticated and request.user.is_staff
    body = {
        "status": "fail" if failed else "ok",
        "failed": failed,
        "checks": {
            name: check.as_dict() if detailed else {"ok": check.ok}
            for name, check in checks.items()
        },
    }
    return JsonResponse(body, status=503 if failed else 200)
