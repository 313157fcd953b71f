"""Push webhooks: verify a request against its tree's secret, parse the sender's push
payload into a PushEvent, record the delivery once, and hand the push to the watch app.

Order of checks (docs/webhooks.md): unknown tree 404; body over the size cap 413 (on
Content-Length before reading, and on what was read); bad or missing signature 403; a
repeat (the same delivery id, or the same signed content: a push's ref, before and after)
is a no-op answered 200 that costs no rate; over the tree's rate 429; then the delivery is
recorded, and its payload is parsed (400), found a duplicate or out of order (200), or
taken (202). Nothing is stored before the signature checks, and a request refused with
429 is not recorded either, so that the sender's retry is processed.

GitHub signs the body only, not X-GitHub-Delivery and with no timestamp, so a captured
body can be resent with a fresh delivery id at any time: idempotency and ordering come
from what the body says (`content_key`, `out_of_order`), never from the delivery id alone.
"""

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone
from redis.exceptions import RedisError

from webapp import access, logs
from webapp.access import AnyUser
from webapp.trees.models import Tree
from webapp.watch.events import ZERO_SHA, BadPush, PushEvent
from webapp.watch.models import Push
from webapp.watch.services import receive_push
from webapp.webhooks.models import Delivery, WebhookEndpoint

log = logs.get(__name__)

Source = Delivery.Source
RATE_CACHE = "api"  # the Redis cache every web process shares (webapp/api/throttling.py)
MAX_DELIVERY_ID = 128  # Delivery.delivery_id's length


@dataclass(frozen=True)
class Reply:
    """What the endpoint answers: an HTTP status and a JSON body."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)


class Refused(Exception):
    """The request is answered `status` with `detail`; what was stored stays stored."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


# --- Secrets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewSecrets:
    """Made by `new_secrets`; shown once (the GitLab token is not stored)."""

    endpoint: WebhookEndpoint
    hmac_secret: str
    gitlab_token: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_secrets(tree: Tree, rotate: bool = False) -> NewSecrets:
    """Make the tree's HMAC secret and GitLab token (refused when set, unless `rotate`:
    then the old ones stop working at once)."""
    with transaction.atomic():
        endpoint, created = WebhookEndpoint.objects.select_for_update().get_or_create(tree=tree)
        if not created and (endpoint.hmac_secret or endpoint.gitlab_token_hash) and not rotate:
            raise Refused(409, f"tree {tree.name} has webhook secrets already (rotate them)")
        hmac_secret, gitlab_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        endpoint.hmac_secret = hmac_secret
        endpoint.gitlab_token_hash = token_hash(gitlab_token)
        endpoint.rotated_at = None if created else timezone.now()
        endpoint.save()
    log.info("webhook secrets set", tree=tree.name, endpoint=endpoint.pk, rotated=not created)
    return NewSecrets(endpoint, hmac_secret, gitlab_token)


# --- Signatures ----------------------------------------------------------------------------


def _b(text: str) -> bytes:
    # Header values may hold any byte (WSGI decodes them as latin-1); compare_digest wants
    # ASCII str or bytes.
    return text.encode("utf-8", "replace")


def hmac_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _hmac_ok(secret: str, message: bytes, header: str) -> bool:
    if not secret:
        return False
    return hmac.compare_digest(_b("sha256=" + hmac_hex(secret, message)), _b(header))


def verify(
    source: str, endpoint: WebhookEndpoint | None, headers: Mapping[str, str], body: bytes
) -> None:
    """Raise Refused(403) unless the request is signed with the tree's secret (and, for the
    generic hook, signed within the allowed clock skew)."""
    if endpoint is None:
        raise Refused(403, "no webhook secret is set for this tree")
    if source == Source.GITHUB:
        if not _hmac_ok(endpoint.hmac_secret, body, headers.get("X-Hub-Signature-256", "")):
            raise Refused(403, "bad or missing X-Hub-Signature-256")
    elif source == Source.GITLAB:
        token = headers.get("X-Gitlab-Token", "")
        stored = endpoint.gitlab_token_hash
        if not (token and stored and hmac.compare_digest(_b(token_hash(token)), _b(stored))):
            raise Refused(403, "bad or missing X-Gitlab-Token")
    else:
        stamp = headers.get("X-Rcubench-Timestamp", "")
        message = _b(stamp) + b"." + body
        if not _hmac_ok(endpoint.hmac_secret, message, headers.get("X-Rcubench-Signature", "")):
            raise Refused(403, "bad or missing X-Rcubench-Signature")
        # Checked after the signature, so that the time is the sender's own: a replay of a
        # captured request is refused once it is older than the window.
        skew = settings.RCUBENCH_WEBHOOK_MAX_SKEW_SECONDS
        if not (stamp.isascii() and stamp.isdigit()) or abs(time.time() - int(stamp)) > skew:
            raise Refused(403, f"X-Rcubench-Timestamp is more than {skew} s from now")


# --- Rate limit ----------------------------------------------------------------------------

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """ "60/minute" -> (60, 60): requests per period in seconds (DRF's notation)."""
    try:
        num, period = rate.split("/")
        return int(num), _PERIODS[period.strip()[0]]
    except (ValueError, KeyError, IndexError) as exc:
        raise ImproperlyConfigured(f"RCUBENCH_WEBHOOK_RATE: not a rate: {rate!r}") from exc


def over_rate(tree: Tree) -> bool:
    """Count one request for the tree in this fixed window; True when over the rate. An
    unreachable cache lets requests through (the counter is a courtesy)."""
    num, period = parse_rate(settings.RCUBENCH_WEBHOOK_RATE)
    key = f"webhook-rate:{tree.pk}:{int(time.time() // period)}"
    cache = caches[RATE_CACHE]
    try:
        cache.add(key, 0, timeout=period + 1)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=period + 1)
            count = 1
    except (RedisError, OSError) as exc:
        log.warning("webhook rate cache unreachable", tree=tree.name, error=str(exc))
        return False
    return count > num


# --- Payloads ------------------------------------------------------------------------------


def _json(body: bytes, content_type: str = "") -> dict[str, Any]:
    """The JSON object of a body; GitHub's form encoding (payload=<json>) too, its UI's
    default content type."""
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode("ascii"), strict_parsing=True)
            body = fields["payload"][0].encode()
        except (UnicodeDecodeError, ValueError, KeyError) as exc:
            raise Refused(400, "form body without a payload field") from exc
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(400, f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise Refused(400, "body is not a JSON object")
    return data


def _pusher(data: dict[str, Any], source: str) -> str:
    """The pusher's address the payload names: GitHub's pusher.email, GitLab's user_email
    (empty where hidden or absent)."""
    if source == Source.GITHUB:
        pusher = data.get("pusher")
        email = pusher.get("email") if isinstance(pusher, dict) else None
    elif source == Source.GITLAB:
        email = data.get("user_email")
    else:
        email = data.get("pusher_email")
    return email if isinstance(email, str) and len(email) <= 254 else ""


def _push(data: dict[str, Any], source: str, forced: object = False) -> PushEvent:
    if not isinstance(forced, bool):
        raise Refused(400, "forced must be true or false")
    try:
        return PushEvent(
            ref=data.get("ref"),  # type: ignore[arg-type]  # PushEvent checks the types
            before=data.get("before"),  # type: ignore[arg-type]
            after=data.get("after"),  # type: ignore[arg-type]
            source=source,
            forced=forced,
            pusher_email=_pusher(data, source),
        )
    except BadPush as exc:
        raise Refused(400, f"not a push: {exc}") from exc


@dataclass(frozen=True)
class Parsed:
    """A verified delivery's event: a push, or a ping (`push` None) answered `detail`."""

    push: PushEvent | None
    detail: str = ""


def parse(source: str, event: str, headers: Mapping[str, str], body: bytes) -> Parsed:
    """The push (or ping) a verified body holds; Refused(400) with the reason otherwise."""
    if source == Source.GITHUB:
        if event == "ping":
            data = _json(body, headers.get("Content-Type", ""))
            return Parsed(None, f"pong (hook {data.get('hook_id')}): {data.get('zen', '')}")
        if event != "push":
            raise Refused(400, f"event {event!r:.40} is not handled: send push events only")
        data = _json(body, headers.get("Content-Type", ""))
        return Parsed(_push(data, source, data.get("forced", False)))
    if source == Source.GITLAB:
        kinds = {"Push Hook": "push", "Tag Push Hook": "tag_push"}
        if event not in kinds:
            raise Refused(400, f"event {event!r:.40} is not handled: send push events only")
        data = _json(body)
        if data.get("object_kind") != kinds[event]:
            raise Refused(400, f"object_kind is not {kinds[event]!r} in a {event}")
        event_ = _push(data, source)
        if event_.is_tag != (event == "Tag Push Hook"):
            raise Refused(400, f"a {event} names {event_.ref!r:.80}")
        return Parsed(event_)
    data = _json(body)
    return Parsed(_push(data, source, data.get("forced", False)))


def event_and_id(source: str, headers: Mapping[str, str], body: bytes) -> tuple[str, str]:
    """The delivery's event name and its idempotency key (see docs/webhooks.md)."""
    if source == Source.GITHUB:
        event, delivery_id = headers.get("X-GitHub-Event", ""), headers.get("X-GitHub-Delivery", "")
    elif source == Source.GITLAB:
        event, delivery_id = (
            headers.get("X-Gitlab-Event", ""),
            headers.get("X-Gitlab-Event-UUID", ""),
        )
    else:
        stamp = headers.get("X-Rcubench-Timestamp", "")
        event, delivery_id = "push", hashlib.sha256(_b(stamp) + b"." + body).hexdigest()
    if not delivery_id:  # GitLab before 15.x sends no UUID: the same body is the same event
        delivery_id = hashlib.sha256(body).hexdigest()
    if len(delivery_id) > MAX_DELIVERY_ID or len(event) > 64:
        raise Refused(400, "delivery id or event name too long")
    return event, delivery_id


# --- The delivery --------------------------------------------------------------------------


def read_body(content_length: str | None, read: Callable[[int], bytes]) -> bytes:
    """The body, refused (413) over RCUBENCH_WEBHOOK_MAX_BYTES by its declared length before
    anything is read, and by what was read."""
    cap = settings.RCUBENCH_WEBHOOK_MAX_BYTES
    try:
        declared = int(content_length or 0)
    except ValueError:
        declared = 0
    if declared > cap:
        raise Refused(413, f"body of {declared} bytes is over the {cap}-byte limit")
    body = read(cap + 1)
    if len(body) > cap:
        raise Refused(413, f"body is over the {cap}-byte limit")
    return body


def content_key(source: str, parsed: Parsed | None, body: bytes) -> str:
    """The idempotency key of what the signature covers: a push's source, ref, before and
    after (the same transition of the same ref is the same event, whatever the delivery id
    or the rest of the body), or the body's SHA-256 for anything else."""
    if parsed is not None and parsed.push is not None:
        e = parsed.push
        return hashlib.sha256(f"{source}\0{e.ref}\0{e.before}\0{e.after}".encode()).hexdigest()
    return hashlib.sha256(body).hexdigest()


def out_of_order(tree: Tree, event: PushEvent) -> str:
    """Why a signed push with new content is still not taken ("" when it is taken), from
    the ref's known head (the newest push of it rcubench stored):
    - its `after` is the known head: a duplicate;
    - its `before` is the known head: taken (a force-push back to an older head too);
    - its `after` is an older head of the ref (stored as a push's before or after): a stale
      replay or a late delivery, which must not supersede the newer head;
    - it creates the ref (deleted since: deletions are not stored): taken;
    - otherwise a delivery in between was missed, or this is a replay of one never stored:
      taken only while no push of the ref is pending, so it cannot supersede one."""
    pushes = Push.objects.filter(tree=tree, branch=event.name, is_tag=event.is_tag, anchor=False)
    head = pushes.order_by("-pk").first()
    if head is None or event.deleted:
        return ""
    if event.after == head.after:
        return f"duplicate: {event.ref} is at {event.after[:12]} already (push {head.pk})"
    if event.before == head.after:
        return ""
    older = pushes.filter(Q(after=event.after) | Q(before=event.after)).order_by("-pk").first()
    if older is not None:
        return (
            f"stale: {event.after[:12]} is an older head of {event.ref} (push {older.pk}); "
            f"its known head is {head.after[:12]} (push {head.pk}): nothing superseded"
        )
    if event.before == ZERO_SHA:  # re-created after a deletion (deletions are not stored)
        return ""
    pending = pushes.filter(state=Push.State.PENDING).order_by("-pk").first()
    if pending is not None:
        return (
            f"out of order: before {event.before[:12]} is not {event.ref}'s known head "
            f"{head.after[:12]}: not superseding pending push {pending.pk}"
        )
    return ""


def receive_delivery(
    source: str,
    tree_name: str,
    headers: Mapping[str, str],
    content_length: str | None,
    read: Callable[[int], bytes],
) -> Reply:
    """Answer one webhook request (the view's whole work)."""
    tree = Tree.objects.filter(name=tree_name).first()
    if tree is None:
        return Reply(404, {"detail": f"no tree named {tree_name!r:.80}"})
    try:
        body = read_body(content_length, read)
        verify(source, WebhookEndpoint.objects.filter(tree=tree).first(), headers, body)
        event, delivery_id = event_and_id(source, headers, body)
    except Refused as exc:
        # Nothing is stored for these (an unsigned request could fill the table otherwise).
        _refused(tree, source, exc)
        return Reply(exc.status, {"detail": exc.detail})
    try:
        parsed: Parsed | None = parse(source, event, headers, body)
        bad: Refused | None = None
    except Refused as exc:
        parsed, bad = None, exc
    key = content_key(source, parsed, body)
    with transaction.atomic():
        # One delivery of a tree at a time: the repeat and ordering checks below read what
        # the previous one stored (the endpoint's row is the tree's webhook lock).
        WebhookEndpoint.objects.select_for_update().filter(tree=tree).first()
        repeat = _repeat(tree, source, delivery_id, key)
        if repeat is not None:
            return repeat
        if over_rate(tree):
            rate = settings.RCUBENCH_WEBHOOK_RATE
            over = Refused(429, f"over this tree's webhook rate ({rate}): try again later")
            _refused(tree, source, over)
            return Reply(over.status, {"detail": over.detail})
        return _record(tree, source, event, delivery_id, key, parsed, bad)


def _refused(tree: Tree, source: str, exc: Refused) -> None:
    log.warning("webhook refused", tree=tree.name, source=source, status=exc.status,
                reason=exc.detail)  # fmt: skip


def _repeat(tree: Tree, source: str, delivery_id: str, key: str) -> Reply | None:
    """The answer to a delivery seen before (by its id, or by its signed content: a replay
    with a fresh id), or None. A repeat stores nothing and counts no rate."""
    seen = Q(delivery_id=delivery_id) | Q(content_key=key)
    delivery = Delivery.objects.filter(seen, tree=tree, source=source).order_by("pk").first()
    if delivery is None:
        return None
    same_id = delivery.delivery_id == delivery_id
    log.info("webhook repeat", delivery=delivery.pk, tree=tree.name, source=source,
             delivery_id=delivery_id, same_id=same_id)  # fmt: skip
    what = f"delivery {delivery_id}" if same_id else f"the content of delivery {delivery.pk}"
    return Reply(200, {
        "detail": f"repeat of {what}: already received "
        f"{delivery.received_at.isoformat()} ({delivery.status_code}: {delivery.outcome})",
        "repeat": True, "push": delivery.push_id, "delivery": delivery.pk,
    })  # fmt: skip


def _record(
    tree: Tree,
    source: str,
    event: str,
    delivery_id: str,
    key: str,
    parsed: Parsed | None,
    bad: Refused | None,
) -> Reply:
    """Store the delivery and what became of it (in the caller's transaction)."""
    push_id: int | None = None
    delivery = Delivery(tree=tree, source=source, event=event, delivery_id=delivery_id,
                        content_key=key)  # fmt: skip
    if bad is not None or parsed is None:
        status, detail = (bad.status, bad.detail) if bad else (400, "not parsed")
    elif parsed.push is None:
        status, detail = 200, parsed.detail
    elif why := out_of_order(tree, parsed.push):
        status, detail = 200, why
    else:
        received = receive_push(tree, parsed.push)
        delivery.push = received.push
        status, detail = 202, received.reason
        push_id = received.push.pk if received.push else None
    delivery.status_code, delivery.outcome = status, detail
    delivery.save()
    log.info("webhook delivery", delivery=delivery.pk, tree=tree.name, source=source,
             hook_event=event, delivery_id=delivery_id, status=status, push=push_id,
             outcome=detail[:200])  # fmt: skip
    reply: dict[str, Any] = {"detail": detail, "delivery": delivery.pk}
    if status == 202:
        reply["push"] = push_id
    return Reply(status, reply)


DELIVERIES_PAGE_SIZE = 50


def delivery_log(user: AnyUser, tree_name: str, page: str | None) -> tuple[Tree, Page]:
    """A page of the tree's deliveries, newest first, for its admins and staff; 404 to
    everyone else (as for anything they may not see)."""
    tree = Tree.objects.filter(name=tree_name).first()
    if tree is None or not access.is_tree_admin(user, tree):
        raise Http404("no such tree")
    rows = (
        Delivery.objects.filter(tree=tree)
        .select_related("push")
        .prefetch_related("push__comparisons")
        .order_by("-received_at", "-pk")
    )
    return tree, Paginator(rows, DELIVERIES_PAGE_SIZE).get_page(page)
