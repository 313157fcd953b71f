"""The admin lists every rcubench model, and each changelist and change page renders."""

import pytest
from django.contrib import admin

from tests.support.factories import BuildFactory, MeasurementFactory, RunFactory

pytestmark = pytest.mark.django_db

RCUBENCH_MODELS = {
    "trees": {"tree", "treemembership", "patchseries", "revision", "build"},
    "comparisons": {"target", "comparison", "run", "measurement"},
    "analysis": {"metricverdict"},
    "alerts": {"alert", "subscription", "optout"},
    "watch": {"watchpolicy", "push", "changepoint"},
    "webhooks": {"webhookendpoint", "delivery"},
}
# Records of what happened (mails, pushes, deliveries, change points) and secrets made by a
# command are read-only: their add page is refused.
READ_ONLY = {"alerts/alert", "watch/push", "watch/changepoint", "webhooks/webhookendpoint",
             "webhooks/delivery"}  # fmt: skip


def test_every_rcubench_model_is_registered():
    registered = {(m._meta.app_label, m._meta.model_name) for m in admin.site._registry}
    expected = {(app, model) for app, models in RCUBENCH_MODELS.items() for model in models}
    assert expected <= registered


def test_admin_index_links_every_model(admin_client):
    html = admin_client.get("/admin/").content.decode()
    for app, models in RCUBENCH_MODELS.items():
        for model in models:
            assert f'href="/admin/{app}/{model}/"' in html


@pytest.mark.parametrize(
    # Sorted: a set's order differs between processes, and pytest-xdist's workers must
    # collect the same items in the same order.
    "app_model",
    sorted(f"{a}/{m}" for a, models in RCUBENCH_MODELS.items() for m in models),
)
def test_changelist_and_add_pages_render(admin_client, app_model):
    MeasurementFactory.create()
    BuildFactory.create()
    assert admin_client.get(f"/admin/{app_model}/").status_code == 200
    add = admin_client.get(f"/admin/{app_model}/add/").status_code
    assert add == (403 if app_model in READ_ONLY else 200)


def test_run_change_page_shows_its_measurements(admin_client):
    m = MeasurementFactory.create(metric="writer_duration")
    page = admin_client.get(f"/admin/comparisons/run/{m.run.pk}/change/").content.decode()
    assert "writer_duration" in page


def test_reaper_action_from_the_admin(admin_client, settings):
    run = RunFactory.create(state="running", started_at="2020-01-01T00:00Z", heartbeat_at=None)
    response = admin_client.post(
        "/admin/comparisons/run/",
        {"action": "reap_stale", "_selected_action": [run.pk]},
        follow=True,
    )
    assert "1 stale run(s) marked incomplete." in response.content.decode()
    run.refresh_from_db()
    assert run.error_code == "lost"
