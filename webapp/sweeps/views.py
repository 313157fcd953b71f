"""The sweep form's view: thin, as the comparison form's (webapp/comparisons/views.py), whose
upload cap, series reading and refusal display it shares."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect

from webapp.comparisons.submission import SubmissionError
from webapp.comparisons.views import CappedUpload, form_request, read_series, refused
from webapp.sweeps import services
from webapp.sweeps.forms import SweepForm

TEMPLATE = "sweeps/submit.html"


@csrf_exempt  # only until the handler is in place: _submit checks the token
@login_required
def submit(request: HttpRequest) -> HttpResponse:
    capped = CappedUpload(request, settings.RCUBENCH_MAX_MBOX_BYTES)
    request.upload_handlers = [capped, *request.upload_handlers]
    return _submit(request, capped)


@csrf_protect
def _submit(request: HttpRequest, capped: CappedUpload) -> HttpResponse:
    user = request.user
    if not user.is_authenticated:
        raise PermissionDenied
    if request.method != "POST":
        return render(request, TEMPLATE, {"form": SweepForm(user)})
    form = SweepForm(user, request.POST, request.FILES)
    series = read_series(form, capped)
    if series is None:
        return render(request, TEMPLATE, {"form": form})
    try:
        sweep = services.submit_sweep(
            services.SweepRequest(pair=form_request(form, user, series[0]), **form.extra())
        )
    except SubmissionError as exc:
        return refused(request, TEMPLATE, form, exc, series[1])
    return redirect("reports:sweep", pk=sweep.pk)
