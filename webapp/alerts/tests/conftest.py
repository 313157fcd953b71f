"""A real SMTP server on loopback (aiosmtpd) that records what it receives and can be told
to answer 421 once or 550, and comparisons in the shapes the alerts must mail."""

import email
import socket
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller

from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MetricVerdictFactory,
    PatchSeriesFactory,
    RevisionFactory,
    TargetFactory,
)
from webapp.trees.models import Patch

COVER_ID = "<20261120.0001-0-dev@example.org>"
PATCH_IDS = ["<20261120.0001-1-dev@example.org>", "<20261120.0001-2-dev@example.org>"]
SERIES_SUBJECT = "[PATCH 0/2] rcu: shrink the expedited grace period"
AUTHOR = "A Developer <dev@example.org>"


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes

    @property
    def message(self) -> EmailMessage:
        return email.message_from_bytes(self.data, policy=policy.default)


@dataclass
class Handler:
    """Records every envelope; `replies` are answered (at RCPT TO or DATA) before any
    acceptance, one per transaction, e.g. ("RCPT", "421 4.3.2 try later")."""

    received: list[Received] = field(default_factory=list)
    replies: list[tuple[str, str]] = field(default_factory=list)
    always: tuple[str, str] | None = None

    def _planned(self, step: str) -> str | None:
        if self.always and self.always[0] == step:
            return self.always[1]
        if self.replies and self.replies[0][0] == step:
            return self.replies.pop(0)[1]
        return None

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        planned = self._planned("RCPT")
        if planned:
            return planned
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        planned = self._planned("DATA")
        if planned:
            return planned
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos),
                                      bytes(envelope.original_content)))  # fmt: skip
        return "250 2.0.0 Message accepted for delivery"

    def to(self, address: str) -> list[Received]:
        return [r for r in self.received if address in r.rcpt_tos]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def smtp(settings):
    """The SMTP server, and the settings pointing the alerts at it."""
    handler = Handler()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_TIMEOUT = 10
    settings.RCUBENCH_MAIL_FROM = "rcubench <rcubench@bench.example.org>"
    settings.RCUBENCH_MAIL_DOMAIN = "bench.example.org"
    settings.RCUBENCH_PUBLIC_URL = "https://rcubench.example.org"
    handler.port = port  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        controller.stop()


def make_comparison(*, series: bool = True, verdict: str = "regression", **kw):
    """A done comparison on tree "rcu" with verdicts: a primary regression first."""
    s = None
    if series:
        s = PatchSeriesFactory.create(subject=kw.pop("subject", SERIES_SUBJECT),
                                      message_id=COVER_ID, author=AUTHOR)  # fmt: skip
        for i, mid in enumerate(PATCH_IDS, 1):
            Patch.objects.create(series=s, index=i, subject=f"[PATCH {i}/2] rcu: step {i}",
                                 author=AUTHOR, message_id=mid)  # fmt: skip
    a = RevisionFactory.create(tree__name=kw.pop("tree_name", "rcu"), ref="v6.12")
    b = RevisionFactory.create(tree=a.tree, ref="v6.12" if series else "rcu/next", series=s)
    c = ComparisonFactory.create(
        revision_a=a, revision_b=b, target=TargetFactory.create(name="qemu-x86_64"),
        benchmarks=["sync-rcu-latency"], state="done", result="ok", verdict=verdict,
        cmdline_b="rcupdate.rcu_expedited=1", **kw,
    )  # fmt: skip
    c.build_a = BuildFactory.create(revision=a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=b, state="done", result="ok")
    c.save()
    MetricVerdictFactory.create(
        comparison=c, metric="writer_duration", statistic="p50", is_primary=True,
        verdict=verdict if verdict != "reliability-regression" else "no-meaningful-change",
        median_a=6.05, median_b=6.65, shift_pct=9.9, ci_low_pct=8.1, ci_high_pct=11.7,
        p_value=0.0012, p_adjusted=0.0036,
    )  # fmt: skip
    MetricVerdictFactory.create(comparison=c, metric="gps", statistic="value", is_primary=False,
                                details={"unit": "count", "relative": True})  # fmt: skip
    return c
