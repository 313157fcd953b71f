"""The mail and the report open with the same sentence (webapp.comparisons.sentence): the
mail as built for a real Alert row, the report as the page serves it."""

import html
import re

import pytest
from django.urls import reverse

from webapp.alerts import services
from webapp.alerts.models import Alert
from webapp.alerts.tests.conftest import make_comparison

pytestmark = pytest.mark.django_db


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_mail_and_the_report_say_the_same_sentence(client):
    c = make_comparison()  # a series: its author gets the mail
    (pk,) = services.notify_comparison(c.pk)
    body = services.render(Alert.objects.get(pk=pk)).get_content()
    mail_sentence = _words(body.split("\n\n")[0])  # the first paragraph, wrapped at 72

    page = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    found = re.search(r'<p class="sentence" id="verdict-sentence">(.*?)</p>', page, re.S)
    assert found, "the report has no verdict sentence"
    assert _words(html.unescape(found.group(1))) == mail_sentence
    assert mail_sentence.startswith("rcubench found a regression on qemu-x86_64")
    assert "(HL shift of per-run p50s, 95% CI)" in mail_sentence
