"""The alert of a comparison whose kernels are being traced (diagnostic runs, asked for by
the policy or a person) points to the report's "Why?" section; one without says nothing of
it. Through the SMTP server on loopback, as the mails go out."""

import pytest

from webapp.alerts import delivery, services
from webapp.alerts.tests.conftest import make_comparison

pytestmark = pytest.mark.django_db


def _body(smtp, c) -> str:
    assert [delivery.deliver(pk) for pk in services.notify_comparison(c.pk)] == ["sent"]
    (got,) = smtp.to("dev@example.org")
    return got.message.get_content()


def test_the_mail_links_the_diagnosis_of_a_traced_comparison(smtp):
    c = make_comparison(diagnosis_per_side=8)
    body = _body(smtp, c)
    report = f"https://rcubench.example.org/comparisons/{c.pk}/"
    lines = body.splitlines()
    at = lines.index(f"  {report}")
    assert lines[at - 1] == "Report, with figures and every run's console:"
    assert lines[at + 1 : at + 3] == [
        "Why: traced runs of both kernels, 8 per side, at",
        f"  {report}#diagnosis",
    ]
    assert lines[at + 3 : at + 5] == ["", "-- "]  # then the footer, as before
    assert all(len(line) <= 78 or line.strip().startswith("https://") for line in lines), body


def test_a_comparison_without_diagnostic_runs_says_nothing_of_them(smtp):
    c = make_comparison()
    body = _body(smtp, c)
    assert "Why:" not in body
    assert "#diagnosis" not in body
    lines = body.splitlines()
    at = lines.index(f"  https://rcubench.example.org/comparisons/{c.pk}/")
    assert lines[at + 1 : at + 3] == ["", "-- "]
