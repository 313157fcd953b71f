"""Project-level views."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from webapp.health import run_checks


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 with every component ok; 503 naming the failed ones otherwise."""
    checks = run_checks()
    failed = sorted(name for name, check in checks.items() if not check["ok"])
    body = {"status": "fail" if failed else "ok", "failed": failed, "checks": checks}
    return JsonResponse(body, status=503 if failed else 200)
