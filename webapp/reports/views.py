"""Report pages and downloads: thin, the data comes from services and exports."""

from django.core.paginator import Paginator
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.http import require_GET

from webapp import access
from webapp.comparisons.models import Run
from webapp.reports import exports, services

LIST_PAGE_SIZE = 50


@require_GET
def comparison_list(request: HttpRequest) -> HttpResponse:
    rows = access.visible_comparisons(request.user, services.comparison_list())
    page = Paginator(rows, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "reports/comparison_list.html", {"page": page})


@require_GET
def comparison(request: HttpRequest, pk: int) -> HttpResponse:
    c = access.get_visible(
        access.visible_comparisons(request.user, services.report_queryset()), pk=pk
    )
    return render(request, "reports/comparison.html", {"report": services.comparison_report(c)})


@require_GET
def comparison_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    c = access.get_visible(access.visible_comparisons(request.user), pk=pk)
    response = StreamingHttpResponse(exports.csv_chunks(c), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="comparison-{c.pk}.csv"'
    return response


@require_GET
def comparison_json(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    c = access.get_visible(
        access.visible_comparisons(request.user, services.report_queryset()), pk=pk
    )
    return StreamingHttpResponse(exports.json_chunks(c), content_type="application/json")


@require_GET
def run_console(request: HttpRequest, pk: int) -> HttpResponse:
    run = access.get_visible(
        access.visible_runs(request.user, Run.objects.only("pk", "console_log")), pk=pk
    )
    return HttpResponse(run.console_log, content_type="text/plain; charset=utf-8")


@require_GET
def series_mbox(request: HttpRequest, pk: int) -> HttpResponse:
    series = access.get_visible(access.visible_series(request.user).only("pk", "mbox"), pk=pk)
    response = HttpResponse(bytes(series.mbox), content_type="application/mbox")
    response["Content-Disposition"] = f'attachment; filename="series-{series.pk}.mbox"'
    return response


@require_GET
def plotly_js(request: HttpRequest, version: str) -> HttpResponse:
    """plotly.min.js from the installed package (the machines have no CDN). The URL names
    the version, so the file is cached for good and an upgrade changes the URL."""
    if version != services.PLOTLY_VERSION:
        raise Http404("not the installed plotly version")
    raw, gz = services.plotly_js()
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(gz, content_type="text/javascript; charset=utf-8")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(raw, content_type="text/javascript; charset=utf-8")
    patch_vary_headers(response, ["Accept-Encoding"])
    patch_cache_control(response, public=True, max_age=365 * 24 * 3600, immutable=True)
    return response
