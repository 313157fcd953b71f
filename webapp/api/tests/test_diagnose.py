"""Diagnostic runs in the API: POST /api/v1/comparisons/<id>/diagnose/ (who may cancel a
comparison may trace its kernels; a refusal is a 400 with the orchestrator's reason), the
comparison's `diagnosis` (what the traced runs found, fed the parses of real captured
traces) and `traced` on every run."""

import json

import pytest

from benchmarks.rcutrace import golden
from tests.support.factories import MeasurementFactory, RunFactory
from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db

BASE = json.loads((golden.FIXTURES / "x86_64-pc-tcg.trace.json").read_text())
PATCHED = json.loads((golden.FIXTURES / "x86_64-pc-tcg-demo.trace.json").read_text())


def _url(c: Comparison) -> str:
    return f"/api/v1/comparisons/{c.pk}/diagnose/"


def _done(c: Comparison) -> Comparison:
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok", verdict="regression")
    c.refresh_from_db()
    return c


def test_a_comparison_without_a_diagnosis_says_null_and_its_runs_are_untraced(world, anon):
    body = anon.get(f"/api/v1/comparisons/{world.public.pk}/").json()
    assert body["diagnosis"] is None
    runs = anon.get(f"/api/v1/comparisons/{world.public.pk}/runs/").json()["results"]
    assert {r["traced"] for r in runs} == {False}
    assert anon.get(f"/api/v1/runs/{world.public_run.pk}/").json()["traced"] is False


@pytest.mark.parametrize("who", ["alice", "carol", "staff"])
def test_who_may_cancel_may_trace_both_kernels(world, client_for, who):
    client = client_for(getattr(world, who))
    c = _done(world.public)
    response = client.post(_url(c), {"runs_per_side": 2}, format="json")
    assert response.status_code == 202, response.content
    assert response["Location"] == f"http://testserver/api/v1/comparisons/{c.pk}/"
    d = response.json()["diagnosis"]
    assert (d["runs_per_side"], d["unfinished"], d["running"]) == (2, 4, True)
    assert d["report_url"].endswith(f"/comparisons/{c.pk}/#diagnosis")
    (bench,) = d["benchmarks"]
    assert (bench["benchmark"], bench["finished"]) == ("sync-rcu-latency", 0)
    assert sorted(r["side"] for r in bench["runs"]) == ["A", "A", "B", "B"]
    assert {(r["usable"], r["why_not"], r["trace_url"]) for r in bench["runs"]} == {
        (False, "not finished", None)
    }
    assert (bench["phases"], bench["share"]) == ([], None)
    runs = client.get(f"/api/v1/comparisons/{c.pk}/runs/").json()["results"]
    assert sorted(r["traced"] for r in runs) == [False, False, True, True, True, True]
    # Asked again: refused with the reason, nothing more scheduled.
    again = client.post(_url(c), {}, format="json")
    assert again.status_code == 400
    assert again.json() == {
        "detail": f"comparison {c.pk} has its diagnostic runs already (2 per side)"
    }
    assert c.runs.filter(traced=True).count() == 4


def test_the_default_is_the_servers_runs_per_side(world, client_for, settings):
    settings.RCUBENCH_DIAGNOSIS_RUNS = 3
    c = _done(world.restricted)
    response = client_for(world.alice).post(_url(c))
    assert response.status_code == 202, response.content
    assert response.json()["diagnosis"]["runs_per_side"] == 3
    assert c.runs.filter(traced=True).count() == 6


def test_refusals_are_400s_with_the_reason(world, client_for):
    client = client_for(world.alice)
    not_done = client.post(_url(world.public), format="json")
    assert not_done.status_code == 400
    assert not_done.json()["detail"].startswith(
        f"comparison {world.public.pk} has not ended ok (queued)"
    )
    c = _done(world.public)
    zero = client.post(_url(c), {"runs_per_side": 0}, format="json")
    assert zero.status_code == 400
    assert zero.json()["detail"].startswith("diagnostic runs per side must be 1 to ")
    word = client.post(_url(c), {"runs_per_side": "many"}, format="json")
    assert word.status_code == 400
    assert list(word.json()) == ["runs_per_side"]
    Comparison.objects.filter(pk=c.pk).update(benchmarks=["boot-time"])
    untraceable = client.post(_url(c), format="json")
    assert untraceable.status_code == 400
    assert "(boot-time) can be traced" in untraceable.json()["detail"]
    assert not c.runs.filter(traced=True).exists()


def test_others_get_403_404_or_401_and_a_read_token_403(world, client_for, anon):
    public, restricted = _done(world.public), _done(world.restricted)
    dave = client_for(world.dave).post(_url(public), format="json")
    assert dave.status_code == 403
    assert "only the submitter, the tree's admins and staff" in dave.json()["detail"]
    assert client_for(world.bob).post(_url(restricted), format="json").status_code == 404
    assert client_for(world.bob).post(_url(public), format="json").status_code == 403
    assert anon.post(_url(public), format="json").status_code == 401
    read_only = client_for(world.alice, ["read"]).post(_url(public), format="json")
    assert read_only.status_code == 403
    assert "lacks the 'submit' scope" in read_only.json()["detail"]
    assert not public.runs.filter(traced=True).exists()
    assert not restricted.runs.filter(traced=True).exists()


def test_the_diagnosis_says_what_the_traced_runs_found(world, anon):
    c = _done(world.public)
    # 5 a side: with every run of a side alike, 4 a side's smallest Brunner-Munzel p (1/35)
    # over the phases that moved no longer clears Benjamini-Hochberg's 5% (q 0.051).
    Comparison.objects.filter(pk=c.pk).update(diagnosis_per_side=5)
    c.refresh_from_db()
    order = c.runs.count()
    for side, digest in (("A", BASE), ("B", PATCHED)):
        for i in range(5):
            run = RunFactory.create(
                comparison=c, side=side, index=10 + i, order=order, traced=True, state="done",
                result="ok", trace_summary=digest, trace_log="(the dump)",
            )  # fmt: skip
            order += 1
            MeasurementFactory.create(run=run, samples=[6.6, 6.71, 6.5])  # untraced: 6.0, ...
    d = anon.get(f"/api/v1/comparisons/{c.pk}/").json()["diagnosis"]
    assert (d["runs_per_side"], d["unfinished"], d["running"]) == (5, 0, False)
    (bench,) = d["benchmarks"]
    assert (bench["finished"], bench["usable"]) == (10, {"A": 5, "B": 5})
    phases = {p["phase"]: p for p in bench["phases"]}
    wait = phases["gp_first_fqs_wait"]
    assert (wait["label"], wait["unit"], wait["n_a"], wait["n_b"]) == (
        "wait before the first FQS scan", "ms", 5, 5
    )  # fmt: skip
    assert (wait["median_a"], wait["median_b"]) == (3.987, 4.984)
    assert wait["shift"] == pytest.approx(4.984 - 3.987)
    assert wait["flagged"]
    assert wait["q_value"] <= 0.05
    assert wait["ci_low"] <= wait["shift"] <= wait["ci_high"]
    assert phases["holdout_kthread_cpu_share"]["unit"] == "share"
    assert not phases["holdout_kthread_cpu_share"]["flagged"]  # 0 on both sides
    share = bench["share"]
    assert (share["part"], share["whole"]) == ("gp_first_fqs_wait", "gp_duration")
    assert share["estimate"] == pytest.approx((4.984 - 3.987) / (5.028 - 4.045))
    assert bench["fqs_scans"] == {"A": {"1": 505}, "B": {"1": 505}}
    assert bench["medians"]["B"]["gp_first_fqs_wait"] == 4.984
    perturbation = {p["side"]: p for p in bench["perturbation"]}
    a = perturbation["A"]
    assert (a["metric"], a["unit"], a["traced_runs"], a["untraced_runs"]) == (
        "writer_duration", "ms", 5, 1
    )  # fmt: skip
    assert a["change"] == pytest.approx(6.6 / 6.0 - 1)
    run = bench["runs"][0]
    assert (run["usable"], run["why_not"], run["paired_share"]) == (True, "", 1.0)
    assert run["url"].endswith(f"/api/v1/runs/{run['id']}/")
    assert run["trace_url"].endswith(f"/runs/{run['id']}/trace.txt")
    assert anon.get(f"/api/v1/runs/{run['id']}/").json()["traced"] is True
