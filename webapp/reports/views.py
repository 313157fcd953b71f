"""Report pages and downloads: thin, the data comes from services and exports."""

from django.contrib import messages
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from webapp import access, plotly
from webapp.bisections import services as bisection_services
from webapp.bisections.models import Bisection
from webapp.comparisons import diagnostic_runs, exports, orchestrator
from webapp.comparisons.models import Run
from webapp.reports import bisection as bisection_pages
from webapp.reports import diagnosis, listing, pages
from webapp.reports import sweep as sweep_pages
from webapp.sweeps import services as sweep_services
from webapp.sweeps.models import Sweep


@require_GET
def comparison_list(request: HttpRequest) -> HttpResponse:
    data = listing.comparison_list_page(request.user, request.GET)
    return render(request, "reports/comparison_list.html", {"list": data, "page": data.page})


@require_GET
def comparison_row(request: HttpRequest, pk: int) -> HttpResponse:
    """One row of the list, polled by htmx while the comparison runs."""
    return HttpResponse(listing.comparison_row(request.user, pk).html)


@require_GET
def comparison(request: HttpRequest, pk: int) -> HttpResponse:
    page = pages.comparison_page(request.user, pk)
    return render(request, "reports/comparison.html", {"page": page})


@require_GET
def comparison_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The comparison page's live part, polled by htmx while it runs; once it is done, the
    page reloads (once) to show the full report with its figures."""
    c = pages.visible_report(request.user, pk)
    live = pages.live_state(c)
    if live.done and request.headers.get("HX-Request") == "true":
        return HttpResponseClientRefresh()
    return render(request, "reports/_live.html", {"live": live, "oob": True})


@require_GET
def comparison_diagnosis_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The "Why?" section's status line, polled by htmx while traced runs go; once they
    are done, the page reloads (once) to show the section with its figures."""
    progress = diagnosis.diagnosis_progress(request.user, pk)
    if not progress.running and request.headers.get("HX-Request") == "true":
        return HttpResponseClientRefresh()
    return render(request, "reports/_diagnosis_status.html", {"s": progress})


@require_POST
def comparison_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel from the page: 404 to those who may not see it, 403 to those who see it but
    may not cancel it (webapp.access), then back to the comparison page."""
    orchestrator.cancel_for(request.user, pk)
    return HttpResponseRedirect(reverse("reports:comparison", args=[pk]))


@require_POST
def comparison_diagnose(request: HttpRequest, pk: int) -> HttpResponse:
    """The "Trace both kernels" button: schedule the comparison's traced diagnostic runs,
    then back to its "Why?" section; a refusal goes there with the reason. 404 to those who
    may not see it, 403 to those who may not cancel it (the same right)."""
    back = reverse("reports:comparison", args=[pk]) + f"#{diagnosis.ANCHOR}"
    try:
        added = diagnosis.request_diagnosis(request.user, pk)
    except diagnostic_runs.DiagnosisRefused as exc:
        messages.error(request, f"Not traced: {exc}")
        return HttpResponseRedirect(back)
    messages.success(request, f"{added} traced diagnostic runs queued; they never enter a "
                              "verdict.")  # fmt: skip
    return HttpResponseRedirect(back)


# --- bisections ---------------------------------------------------------------------


@require_POST
def comparison_bisect(request: HttpRequest, pk: int) -> HttpResponse:
    """The Bisect buttons: start (or join) a bisection of the comparison, then its page; a
    refusal goes back to the comparison with the reason. 404 to those who may not see the
    comparison, 403 to those who see it but may not submit to its tree (services.start)."""
    try:
        statistic = bisection_pages.posted_statistic(request.POST)
        b, created = bisection_services.start(
            pk, mode=request.POST.get("mode", Bisection.Mode.BISECT), statistic=statistic,
            user=request.user, trigger=Bisection.Trigger.WEB,
        )  # fmt: skip
    except bisection_services.BisectionRefused as exc:
        messages.error(request, f"Not bisected: {exc}")
        return HttpResponseRedirect(reverse("reports:comparison", args=[pk]) + "#bisect")
    if not created:
        messages.info(request, "This bisection was already running: your request joined it.")
    return HttpResponseRedirect(reverse("reports:bisection", args=[b.pk]))


@require_GET
def bisection_list(request: HttpRequest) -> HttpResponse:
    page = bisection_pages.bisection_list_page(request.user, request.GET)
    return render(request, "reports/bisection_list.html", {"page": page})


@require_GET
def bisection(request: HttpRequest, pk: int) -> HttpResponse:
    page = bisection_pages.bisection_page(request.user, pk)
    return render(request, "reports/bisection.html", {"page": page})


@require_GET
def bisection_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The bisection page's live part, polled by htmx while it runs; once it is done, the
    page reloads (once) to show the outcome with its figure."""
    page = bisection_pages.bisection_page(request.user, pk, live=True)
    if page.done and request.headers.get("HX-Request") == "true":
        return HttpResponseClientRefresh()
    return render(request, "reports/_bisection_live.html", {"page": page})


@require_POST
def bisection_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel from the page: 404 to those who may not see it, 403 to those who see it but
    may not cancel it (bisections.services.cancel_for), then back to its page."""
    bisection_services.cancel_for(request.user, pk)
    return HttpResponseRedirect(reverse("reports:bisection", args=[pk]))


@require_GET
def run(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "reports/run.html", {"page": pages.run_page(request.user, pk)})


@require_GET
def tree(request: HttpRequest, name: str) -> HttpResponse:
    return render(request, "reports/tree.html", {"page": pages.tree_page(request.user, name)})


@require_GET
def series(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "reports/series.html", {"page": pages.series_page(request.user, pk)})


@require_GET
def comparison_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    c = access.get_visible(access.visible_comparisons(request.user), pk=pk)
    response = StreamingHttpResponse(exports.csv_chunks(c), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="comparison-{c.pk}.csv"'
    return response


@require_GET
def comparison_json(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    c = access.get_visible(access.visible_comparisons(request.user, pages.report_queryset()), pk=pk)
    return StreamingHttpResponse(exports.json_chunks(c), content_type="application/json")


@require_GET
def run_console(request: HttpRequest, pk: int) -> HttpResponse:
    run = access.get_visible(
        access.visible_runs(request.user, Run.objects.only("pk", "console_log")), pk=pk
    )
    return HttpResponse(run.console_log, content_type="text/plain; charset=utf-8")


@require_GET
def run_trace(request: HttpRequest, pk: int) -> HttpResponse:
    """A traced run's RCU trace in ftrace's text form, for trace viewers (Perfetto opens
    it); 404 where the run is not visible or has no trace."""
    response = HttpResponse(diagnosis.run_trace(request.user, pk),
                            content_type="text/plain; charset=utf-8")  # fmt: skip
    response["Content-Disposition"] = f'attachment; filename="rcubench-run{pk}-trace.txt"'
    return response


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
    if version != plotly.PLOTLY_VERSION:
        raise Http404("not the installed plotly version")
    raw, gz = plotly.plotly_js()
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(gz, content_type="text/javascript; charset=utf-8")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(raw, content_type="text/javascript; charset=utf-8")
    patch_vary_headers(response, ["Accept-Encoding"])
    patch_cache_control(response, public=True, max_age=365 * 24 * 3600, immutable=True)
    return response


@require_GET
def sweep(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "reports/sweep.html", {"page": sweep_pages.sweep_page(request.user, pk)})


@require_POST
def sweep_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel from the page: 404 to those who may not see it, 403 to those who may not
    cancel its comparisons, then back to its page."""
    try:
        sweep_services.cancel_for(request.user, pk)
    except Sweep.DoesNotExist:
        raise Http404(f"no sweep {pk}") from None
    return HttpResponseRedirect(reverse("reports:sweep", args=[pk]))
