"""The submission form's view: thin; the submission service decides, the form shows."""

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect

from webapp import logs
from webapp.comparisons.forms import FIELDS, SubmitForm, too_large_message
from webapp.comparisons.models import Comparison
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.trees import lore

log = logs.get(__name__)


class CappedUpload(FileUploadHandler):
    """Drops an upload once it passes `limit` bytes, before the next handlers store it (in
    memory up to FILE_UPLOAD_MAX_MEMORY_SIZE, on disk beyond): the rest of the request is
    still read, and the form says "file too large" beside the field."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.received = 0
        self.too_large: set[str] = set()

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.too_large.add(str(self.field_name))
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler makes the file


@csrf_exempt  # only until the handler is in place: _submit checks the token
@login_required
def submit(request: HttpRequest) -> HttpResponse:
    # Upload handlers must be set before anything reads the body, which the CSRF check does.
    capped = CappedUpload(request, settings.RCUBENCH_MAX_MBOX_BYTES)
    request.upload_handlers = [capped, *request.upload_handlers]
    return _submit(request, capped)


@csrf_protect
def _submit(request: HttpRequest, capped: CappedUpload) -> HttpResponse:
    user = request.user
    if not user.is_authenticated:  # login_required sent anyone else to the login page
        raise PermissionDenied
    if request.method != "POST":
        return render(request, "comparisons/submit.html", {"form": SubmitForm(user)})
    form = SubmitForm(user, request.POST, request.FILES)
    series = read_series(form, capped)
    if series is None:
        return render(request, "comparisons/submit.html", {"form": form})
    try:
        comparison = submit_comparison(form_request(form, user, series[0]))
    except SubmissionError as exc:
        return refused(request, "comparisons/submit.html", form, exc, series[1])
    return redirect("reports:comparison", pk=comparison.pk)


def read_series(form: SubmitForm, capped: CappedUpload) -> tuple[bytes | None, str] | None:
    """Side B's series (the uploaded mbox, or lore's for the message-id; None without
    one) and the form field it came from; None when the form is refused (its errors set)."""
    if "mbox" in capped.too_large:
        form.add_error("mbox", too_large_message(capped.limit))
    if not form.is_valid():
        return None
    data = form.cleaned_data
    if data["mbox"] is not None:
        return data["mbox"].read(), "mbox"
    if data["message_id"]:
        try:
            return lore.fetch(data["message_id"]), "message_id"
        except lore.LoreFetchError as exc:
            form.add_error("message_id", str(exc))
            return None
    return None, "mbox"


def form_request(form: SubmitForm, user: Any, mbox: bytes | None) -> ComparisonRequest:
    data = form.cleaned_data
    return ComparisonRequest(
        tree=data["tree"], base_ref=data["base_ref"], head_ref=data["head_ref"],
        series_mbox=mbox, patch_fallback=data["patch_fallback"],
        benchmarks=tuple(data["benchmarks"]), target=data["target"],
        cmdline_a=data["cmdline_a"], cmdline_b=data["cmdline_b"],
        min_runs=data["min_runs"], max_runs=data["max_runs"],
        threshold_pct=data["threshold_pct"], visibility=data["visibility"],
        trigger=Comparison.Trigger.WEB, submitted_by=user.pk,
        # The user name, as the API stores it: never the account's e-mail address, which
        # a public report would publish.
        requested_by=f"web:{user.get_username()}",
    )  # fmt: skip


def refused(
    request: HttpRequest, template: str, form: SubmitForm, exc: SubmissionError, series_field: str
) -> HttpResponse:
    """The form again, the service's refusal beside the field it names."""
    # A browser does not keep a chosen file across the page it gets back.
    reupload = form.cleaned_data.get("mbox") is not None
    field = series_field if exc.field == "series" else FIELDS.get(exc.field, exc.field)
    # A field the form does not have: above the form.
    form.add_error(field if field in form.fields else None, exc.message)
    log.info("submission refused", user=request.user.pk, field=exc.field, reason=exc.message)
    return render(request, template, {"form": form, "reupload": reupload})
