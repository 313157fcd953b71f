"""Kernels named as people name them (webapp/comparisons/names.py): a webhook comparison made
by a real push through /hooks/github/ names its branch, 12-digit sha and commit subject in
the summary's header, the list rows and the API; a series is its base plus its patches; the
build records the subject of the commit it resolved; older rows without one show the sha."""

from pathlib import Path

import pytest
from django.urls import reverse

from engine.build import kconfig
from engine.build.arch import profile
from engine.build.store import Store, cache_key
from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    PatchSeriesFactory,
    RevisionFactory,
    TreeFactory,
)
from webapp.comparisons.names import kernel_names
from webapp.comparisons.summary import header
from webapp.reports.listing import comparison_list
from webapp.reports.pages import report_queryset
from webapp.trees import services as trees
from webapp.trees.models import Patch
from webapp.watch.tests.test_services import Repo
from webapp.webhooks.tests.conftest import HEAD_SUBJECT, pushed_comparison

pytestmark = pytest.mark.django_db


def test_a_webhook_comparison_names_its_branch_short_sha_and_subject(client, tmp_path):
    c = pushed_comparison(client, tmp_path)
    head, base = c.revision_b.ref, c.revision_a.ref  # the push's sha, the start ref's
    # Recorded when the submission resolved the refs in the tree: no git call to show it.
    assert (c.revision_b.base_sha, c.revision_b.subject) == (head, HEAD_SUBJECT)
    a, b = header(report_queryset().get(pk=c.pk)).kernels
    assert b.name.text == f'linux-watch/rcu/dev {head[:12]} ("{HEAD_SUBJECT}")'
    assert (b.name.where, b.name.sha) == ("linux-watch/rcu/dev", head)
    assert a.name.text == f'linux-watch {base[:12]} ("v6.12")'  # a bare sha: no ref shown
    # The list rows read the same names from their annotations, without more queries.
    assert kernel_names(comparison_list().get(pk=c.pk)) == (a.name, b.name)
    detail = client.get(f"/api/v1/comparisons/{c.pk}/").json()
    assert (detail["name_b"], detail["branch"], detail["subject_b"]) == (
        b.name.text, "rcu/dev", HEAD_SUBJECT)  # fmt: skip
    listed = client.get("/api/v1/comparisons/").json()["results"][0]
    assert (listed["name_a"], listed["name_b"]) == (a.name.text, b.name.text)


def test_a_series_is_named_as_its_base_plus_its_patches():
    series = PatchSeriesFactory.create(subject="[PATCH v3 0/2] rcu: shrink the expedited GP")
    for i in (1, 2):
        Patch.objects.create(series=series, index=i, subject=f"rcu: step {i}")
    base = RevisionFactory.create(tree__name="linux-6.12", ref="v6.12", subject="Linux 6.12")
    head = RevisionFactory.create(tree=base.tree, ref="v6.12", base_sha=base.base_sha,
                                  sha="f" * 40, series=series, subject="Linux 6.12")  # fmt: skip
    c = ComparisonFactory.create(revision_a=base, revision_b=head)
    a, b = header(c).kernels
    short = base.base_sha[:12]  # the base's sha, which people have, not the one git am made
    assert a.name.text == f'linux-6.12/v6.12 {short} ("Linux 6.12")'
    assert b.name.text == (f'linux-6.12/v6.12 {short} ("Linux 6.12") + 2 patches: '
                           "rcu: shrink the expedited GP (v3)")  # fmt: skip
    assert kernel_names(comparison_list().get(pk=c.pk)) == (a.name, b.name)


def test_an_older_revision_without_a_subject_shows_its_sha_and_an_unresolved_one_its_ref():
    old = RevisionFactory.create(tree__name="rcu", ref="rcu/next", subject="")
    pending = RevisionFactory.create(tree=old.tree, ref="rcu/dev", base_sha="", sha="")
    a, b = header(ComparisonFactory.create(revision_a=old, revision_b=pending)).kernels
    assert a.name.text == f"rcu/rcu/next {old.sha[:12]}"
    assert b.name.text == "rcu/rcu/dev"


def test_the_build_records_the_subject_of_the_commit_it_resolved(tmp_path, settings):
    """Through execute_build and the build engine on a real repository; the kernel is
    served from the artifact store (planted under its cache key), so make does not run."""
    repo = Repo(tmp_path)
    sha = repo.commit("rcu: Fix a race in rcu_gp_kthread()")
    repo.git("push", "--quiet", "origin", "master")
    settings.RCUBENCH_DATA_DIR = str(tmp_path / "data")
    arch = profile("x86_64")
    key = cache_key(sha, "x86_64", kconfig.config_hash(arch, kconfig.merge(arch, ())),
                    arch.toolchain())  # fmt: skip
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    Store(Path(settings.RCUBENCH_DATA_DIR) / "build").publish(
        key, {"bzImage": image}, {"image": "bzImage"}, limit=1 << 20
    )
    tree = TreeFactory.create(url=str(repo.bare))
    revision = RevisionFactory.create(tree=tree, ref="master", base_sha="", sha="")
    build = BuildFactory.create(revision=revision, sha="", toolchain="")
    trees.execute_build(build.pk)
    build.refresh_from_db()
    revision.refresh_from_db()
    assert (build.result, build.cached) == ("ok", True), build.error_message
    assert (revision.base_sha, revision.subject) == (sha, "rcu: Fix a race in rcu_gp_kthread()")


def test_the_report_title_names_both_kernels_with_the_full_sha_a_click_away(client, tmp_path):
    c = pushed_comparison(client, tmp_path)
    html = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    title = html[html.index("<h1>") : html.index("</h1>")]
    head = c.revision_b.ref
    assert "linux-watch/rcu/dev" in title
    assert f'href="#kernels" title="{head}">{head[:12]}</a>' in title
    assert "(“rcu: Make synchronize_rcu() faster”)" in title
    assert "against" in title


def test_the_tree_pages_pushes_name_each_head_by_sha_and_subject(client, tmp_path):
    c = pushed_comparison(client, tmp_path)
    head = c.revision_b.ref
    html = client.get(reverse("reports:tree", args=["linux-watch"])).content.decode()
    subject = f'<span class="subject" title="{HEAD_SUBJECT}">(“{HEAD_SUBJECT}”)</span>'
    commit = f'<span class="sha mono" title="{head}">{head[:12]}</span> {subject}'
    assert html.count(commit) == 2  # refs under test, and the pushes
