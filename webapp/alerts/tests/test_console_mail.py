"""A console finding in the alert mail, through the real SMTP server: a comparison whose
metrics moved nothing but whose B kernel warns in every run is mailed to the tree's
subscribers for it, with the message, its counts and its first line; one whose kernels
complain alike is not mailed."""

from pathlib import Path

import pytest

from engine.run import signatures
from tests.support.factories import RunFactory
from webapp.alerts import delivery, services
from webapp.alerts.models import Subscription
from webapp.alerts.tests.conftest import make_comparison
from webapp.comparisons import console_diff
from webapp.states import Result, State

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[3] / "engine" / "run" / "tests" / "fixtures"
WARN = (FIXTURES / "x86_64-warn-once.log").read_bytes().decode("utf-8", "surrogateescape")
BASE = (FIXTURES / "x86_64-base.log").read_bytes().decode("utf-8", "surrogateescape")
LIST = "rcu@vger.example.org"


def _with_runs(a: str, b: str, n: int = 3, **kw: object):
    c = make_comparison(series=False, verdict="no-meaningful-change", **kw)
    for side, console in (("A", a), ("B", b)):
        for _ in range(n):
            RunFactory.create(comparison=c, side=side, state=State.DONE, result=Result.OK,
                              console_signatures=signatures.scan(console).as_json())  # fmt: skip
    Subscription.objects.create(address=LIST)
    return c


def test_a_warning_in_every_b_run_is_mailed_with_its_counts_and_first_line(smtp):
    c = _with_runs(BASE, WARN)
    ids = services.notify_comparison(c.pk)
    assert [delivery.deliver(pk) for pk in ids] == ["sent"]
    msg = smtp.to(LIST)[0].message
    assert msg["Subject"].startswith(
        "[rcubench] rcu/rcu/next: sync-rcu-latency: new console "
        "message 'WARNING at kernel/rcu/tree.c synchronize_rcu'"
    )
    body = msg.get_content()
    # The metrics' own verdict is told as it is; the finding follows the table.
    assert "rcubench found no meaningful change" in body
    block = body[body.index("Console differences") : body.index("Kernels:")]
    assert ("sync-rcu-latency: WARNING at kernel/rcu/tree.c synchronize_rcu: in 3 of 3 B runs,"
            in " ".join(block.split()))  # fmt: skip
    assert "none of 3 A runs [finding]" in " ".join(block.split())
    assert "e.g. WARNING: CPU: " in block
    assert all(len(line) <= 78 for line in block.splitlines()), block


def test_kernels_that_complain_alike_are_not_mailed(smtp):
    c = _with_runs(WARN, WARN)
    assert services.notify_comparison(c.pk) == []


def test_the_console_is_read_once_per_notification(smtp, monkeypatch):
    # The kind (a console finding) and the subject both need the differences: one read,
    # which scans every run's stored signatures.
    c = _with_runs(BASE, WARN)
    reads = []
    real = console_diff.console_differences  # what services imported

    def counted(comparison):
        reads.append(comparison.pk)
        return real(comparison)

    monkeypatch.setattr(services, "console_differences", counted)
    assert len(services.notify_comparison(c.pk)) == 1
    assert reads == [c.pk]
