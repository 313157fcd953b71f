"""The REST API from a terminal: what `./manage.py compare --server URL --token T` uses to
submit, follow, cancel and read the verdicts of a comparison on a remote rcubench, so that
its output is the local command's (webapp/comparisons/management/commands/compare.py)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from stats.verdicts import FAILURE_STATISTIC
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.progress import Progress
from webapp.comparisons.summary import VerdictRow, verdict_order

API = "/api/v1/"
TIMEOUT = 60.0  # seconds per request (a submission with a lore fetch waits for b4)


class RemoteError(Exception):
    """The server refused the request or could not be reached. `fields` holds a 400's
    {field: message} (the submission service's field names)."""

    def __init__(self, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


@dataclass(frozen=True)
class Remote:
    """A comparison as the API returns it (the fields the command reads)."""

    pk: int
    state: str
    result: str
    verdict: str
    error_code: str
    error_message: str
    report_url: str
    progress: Progress
    name_a: str = ""  # the kernels as people name them (older servers: the refs)
    name_b: str = ""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> "Remote":
        p = body.get("progress") or {}
        return cls(
            pk=body["id"], state=body["state"], result=body["result"], verdict=body["verdict"],
            error_code=body["error_code"], error_message=body["error_message"],
            report_url=body["report_url"],
            progress=Progress(p.get("phase", body["state"]), p.get("done", 0),
                              p.get("total", 0), p.get("failed", 0), p.get("detail", "")),
            name_a=body.get("name_a") or body.get("base_ref", ""),
            name_b=body.get("name_b") or body.get("head_ref", ""),
        )  # fmt: skip


class Client:
    def __init__(self, server: str, token: str, timeout: float = TIMEOUT) -> None:
        if not server.startswith(("http://", "https://")):
            raise RemoteError(f"--server: {server!r} is not an http:// or https:// URL")
        self.base = server.rstrip("/") + API
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def submit(self, fields: dict[str, Any], series: Path | None = None) -> Remote:
        """Submit a comparison: JSON, or multipart with the series' mbox."""
        if series is None:
            return Remote.from_json(self._call("POST", "comparisons/", json=fields))
        try:
            mbox = series.read_bytes()
        except OSError as exc:
            raise RemoteError(f"cannot read {series}: {exc.strerror}") from None
        form = {k: _form_value(v) for k, v in fields.items() if v is not None}
        files = {"series": (series.name, mbox, "application/mbox")}
        return Remote.from_json(self._call("POST", "comparisons/", data=form, files=files))

    def comparison(self, pk: int) -> Remote:
        return Remote.from_json(self._call("GET", f"comparisons/{pk}/"))

    def cancel(self, pk: int) -> Remote:
        return Remote.from_json(self._call("POST", f"comparisons/{pk}/cancel/"))

    def summary(self, pk: int) -> dict[str, Any]:
        """The comparison's summary, as `compare --format json` prints it locally."""
        body = self._call("GET", f"comparisons/{pk}/data.json", params={"samples": "false"})
        if not isinstance(body, dict):
            raise RemoteError(f"the server's summary of comparison {pk} is not a JSON object")
        return body

    def verdict_rows(self, pk: int) -> list[VerdictRow]:
        """The verdict rows as the local command prints them (same order and format)."""
        rows: list[dict[str, Any]] = []
        url: str | None = f"{self.base}comparisons/{pk}/verdicts/?page_size=500"
        while url:
            page = self._call("GET", url)
            rows += page["results"]
            url = page["next"]
        return verdict_rows(rows)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = path if path.startswith(("http://", "https://")) else self.base + path
        try:
            response = self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise RemoteError(f"cannot reach {self.base}: {_root_cause(exc)}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.ok:
            return body
        raise _refusal(response.status_code, body)


def _root_cause(exc: BaseException) -> str:
    """What failed under requests' and urllib3's wrappers, e.g. "Connection refused"
    rather than three nested reprs; the whole text when no socket error is at the root."""
    cause: BaseException | None = exc
    seen: list[BaseException] = []
    while cause is not None and cause not in seen:
        seen.append(cause)
        reason = getattr(cause, "reason", None)  # urllib3's MaxRetryError
        cause = (
            reason if isinstance(reason, BaseException) else (cause.__cause__ or cause.__context__)
        )
    root = seen[-1]
    if isinstance(root, OSError) and root.strerror:
        return root.strerror
    return str(exc)


def _form_value(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return [str(x) for x in v]
    return str(v)


def _refusal(status: int, body: Any) -> RemoteError:
    if status == 400 and isinstance(body, dict) and "detail" not in body:
        fields = {k: _first(v) for k, v in body.items()}
        return RemoteError("; ".join(f"{k}: {m}" for k, m in fields.items()), fields)
    detail = body.get("detail") if isinstance(body, dict) else None
    if not detail and isinstance(body, dict):
        detail = "; ".join(f"{k}: {_first(v)}" for k, v in body.items())
    if status == 401:
        return RemoteError(f"the server refused the token (401: {detail}); create one at "
                           "/accounts/tokens/ and pass it with --token")  # fmt: skip
    return RemoteError(f"the server answered {status}: {detail or 'no details'}")


def _first(v: Any) -> str:
    if isinstance(v, list) and v:
        return str(v[0])
    if isinstance(v, dict) and v:
        return _first(next(iter(v.values())))
    return str(v)


_VERDICT_FIELDS = {f.name for f in MetricVerdict._meta.get_fields() if f.concrete} - {
    "id", "comparison",
}  # fmt: skip


def verdict_rows(rows: list[dict[str, Any]]) -> list[VerdictRow]:
    """The API's verdicts as the report's VerdictRows, in its order (primary metrics first,
    the most severe first, then benchmark, metric and statistic); failure-rate rows left
    out, as the report lists them apart."""
    out = []
    for row in rows:
        if row["statistic"] == FAILURE_STATISTIC:
            continue
        fields = {k: v for k, v in row.items() if k in _VERDICT_FIELDS and k != "created_at"}
        v = MetricVerdict(**fields)
        v.details = v.details or {}
        out.append(VerdictRow(v, row.get("unit") or "", bool(v.details.get("relative", True))))
    out.sort(key=lambda r: verdict_order(r.verdict))
    return out
