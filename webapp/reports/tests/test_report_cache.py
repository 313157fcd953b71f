"""A done comparison's report is drawn and rendered once, then served from the "reports"
cache (its figures, and its whole body); a comparison that is not done is never cached: its
page is read fresh at each request."""

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from webapp.analysis.models import MetricVerdict
from webapp.reports import figures, pages, sections


@pytest.fixture
def drawn(monkeypatch):
    """Counts the figures figures.py draws (each ECDF is one per metric)."""
    calls = {"ecdf": 0}
    real = figures.ecdf_figure

    def counting(*args, **kwargs):
        calls["ecdf"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(figures, "ecdf_figure", counting)
    return calls


@pytest.fixture
def finished(done_comparison):
    done_comparison.finished_at = timezone.now()
    done_comparison.save(update_fields=["finished_at"])
    return done_comparison


def _get(client, c):
    with CaptureQueriesContext(connection) as q:
        response = client.get(reverse("reports:comparison", args=[c.pk]))
    assert response.status_code == 200
    return response.content.decode(), len(q.captured_queries)


def test_a_done_comparisons_figures_are_drawn_once_then_served_from_the_cache(
    client, finished, drawn
):
    first, first_queries = _get(client, finished)
    assert drawn["ecdf"] == 2  # writer_duration and gps
    assert caches["reports"].get(sections.figures_cache_key(finished)) is not None
    second, second_queries = _get(client, finished)
    assert drawn["ecdf"] == 2  # nothing drawn again
    assert second_queries == 1 < first_queries  # the comparison's cache key, nothing else
    assert second == first
    assert second.count("Plotly.newPlot") == first.count("Plotly.newPlot") > 0


def test_the_cache_is_shared_through_its_backend_not_the_process(client, finished, drawn):
    """What one gunicorn process drew, another reads: the entry is in the cache backend
    (files), so dropping the process's cache objects does not lose it."""
    _get(client, finished)
    caches["reports"].close()
    del caches["reports"]
    _get(client, finished)
    assert drawn["ecdf"] == 2


@pytest.mark.parametrize("state", ["queued", "building", "running", "analysing"])
def test_a_comparison_that_is_not_done_is_never_cached(client, finished, drawn, state):
    type(finished).objects.filter(pk=finished.pk).update(state=state, result="", verdict="")
    finished.refresh_from_db()
    assert sections.figures_cache_key(finished) is None
    _get(client, finished)
    _get(client, finished)
    assert drawn["ecdf"] == 0  # not drawn before it is done
    assert sections.cached_figure_sections(finished)  # drawn when asked, never stored
    assert drawn["ecdf"] == 2
    sections.cached_figure_sections(finished)
    assert drawn["ecdf"] == 4


def test_a_done_comparison_without_a_finish_time_is_not_cached(done_comparison, drawn):
    assert done_comparison.finished_at is None
    sections.cached_figure_sections(done_comparison)
    sections.cached_figure_sections(done_comparison)
    assert drawn["ecdf"] == 4


def test_finishing_again_or_a_new_figures_version_draws_them_again(
    client, finished, drawn, monkeypatch
):
    _get(client, finished)
    finished.finished_at += timedelta(seconds=1)  # reopened and finished again
    finished.save(update_fields=["finished_at"])
    _get(client, finished)
    assert drawn["ecdf"] == 4
    monkeypatch.setattr(sections, "FIGURES_VERSION", sections.FIGURES_VERSION + 1)
    _get(client, finished)
    assert drawn["ecdf"] == 6
    _get(client, finished)
    assert drawn["ecdf"] == 6
    monkeypatch.setattr(pages, "REPORT_VERSION", pages.REPORT_VERSION + 1)
    _get(client, finished)  # rendered again, from the figures' entry
    assert drawn["ecdf"] == 6


def test_a_done_reports_body_is_rendered_once_and_keyed_by_its_finish(client, finished, drawn):
    """Its verdicts are stored before it is done and never after, so the body is cached
    whole; what would change them (reopened, finished again) changes the key."""
    badge = 'class="badge v-significant-but-small"'
    first, _ = _get(client, finished)
    assert badge in first
    assert caches["reports"].get(pages.report_cache_key(finished)) is not None
    MetricVerdict.objects.filter(comparison=finished, verdict="significant-but-small").update(
        verdict="inconclusive"
    )
    assert badge in _get(client, finished)[0]  # served from the cache
    finished.finished_at += timedelta(seconds=1)
    finished.save(update_fields=["finished_at"])
    second, _ = _get(client, finished)
    assert drawn["ecdf"] == 4  # drawn again (their key has the finish time too)...
    assert badge not in second  # ...and the body rendered again from fresh rows


def test_a_reports_body_in_the_cache_does_not_depend_on_who_looks(
    client, django_user_model, finished
):
    anonymous, _ = _get(client, finished)
    client.force_login(django_user_model.objects.create_user("someone", is_staff=True))
    logged_in, _ = _get(client, finished)
    # The body, up to what the page adds after it for some readers only (bisect buttons,
    # mail): the whitespace between them is the template's, not the body's.
    body = anonymous[anonymous.index("<h1>Comparison") : anonymous.index("</body>")].rstrip()
    assert body in logged_in
    assert 'id="cancel"' not in logged_in  # nothing to cancel once done


def test_a_cache_that_fails_draws_the_figures_all_the_same(finished, drawn, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise OSError("read-only file system")

    cache = caches["reports"]
    monkeypatch.setattr(cache, "get", broken)
    monkeypatch.setattr(cache, "set", broken)
    assert sections.cached_figure_sections(finished)
    assert drawn["ecdf"] == 2
    assert "report cache: cannot" in caplog.text


def test_the_cached_figures_are_the_ones_drawn(finished):
    stored = sections.cached_figure_sections(finished)  # draws and stores
    cached = sections.cached_figure_sections(finished)
    assert cached == stored
    shape = [(b.benchmark, [(m.metric, m.unit, m.is_primary, len(m.figures)) for m in b.metrics])
             for b in sections.figure_sections(finished)]  # fmt: skip
    assert shape == [(b.benchmark, [(m.metric, m.unit, m.is_primary, len(m.figures))
                                    for m in b.metrics]) for b in cached]  # fmt: skip
