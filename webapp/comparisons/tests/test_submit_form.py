"""The submission form (/submit/) through Django's test client, on the demo tree: login
required, only the user's trees offered, every refusal beside its field in the submission
service's words with nothing stored, and a submission that lands on its comparison page."""

import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from engine.build.tests.conftest import BASE_TAG, DEFAULT_TREE, FIXTURES
from tests.support.factories import MembershipFactory, TreeFactory, UserFactory
from webapp.comparisons.models import Comparison
from webapp.trees.models import PatchSeries, Revision, Tree

pytestmark = pytest.mark.django_db

URL = "/submit/"
TWO_PATCHES = (FIXTURES / "two-patches.mbox").read_bytes()
CONFLICT = (FIXTURES / "conflict.mbox").read_bytes()
NOT_REACHED = "<no-such-series.rcubench@example.org>"


@pytest.fixture
def tree() -> Tree:
    assert (DEFAULT_TREE / "HEAD").exists(), f"{DEFAULT_TREE} missing: run scripts/setup.sh"
    return TreeFactory.create(name="linux-6.12", url=str(DEFAULT_TREE), public=False)


@pytest.fixture
def user(tree):
    member = UserFactory.create(username="ada", email="ada@example.org")
    MembershipFactory.create(tree=tree, user=member)
    return member


@pytest.fixture
def client_in(client, user, x86_target) -> Client:
    client.force_login(user)
    return client


def _fields(tree: Tree, **change: object) -> dict[str, object]:
    data: dict[str, object] = {
        "tree": tree.name, "base_ref": BASE_TAG, "head_ref": "", "message_id": "",
        "benchmarks": ["sync-rcu-latency"], "target": "qemu-x86_64", "min_runs": 24,
        "max_runs": 96, "threshold_pct": 2.0, "cmdline_a": "", "cmdline_b": "",
        "visibility": "",
    }  # fmt: skip
    data.update(change)
    return {k: v for k, v in data.items() if v is not None}


def _mbox(data: bytes, name: str = "series.mbox") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/mbox")


def _nothing_stored() -> None:
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()
    assert not PatchSeries.objects.exists()


def test_the_form_needs_a_login(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={URL}"
    assert client.post(URL, {})["Location"].startswith(reverse("login"))
    _nothing_stored()


def test_only_the_users_trees_are_offered_with_benchmarks_described(client_in, tree):
    TreeFactory.create(name="not-mine")
    response = client_in.get(URL)
    assert response.status_code == 200
    form = response.context["form"]
    assert [name for name, _ in form.fields["tree"].choices] == ["linux-6.12"]
    page = response.content.decode()
    assert 'value="not-mine"' not in page
    assert "sync-rcu-latency: " in page  # each benchmark with its description
    # Each preset, a benchmark of its own, after its base, saying what it sets.
    choices = [name for name, _ in form.fields["benchmarks"].choices]
    assert choices.index("sync-rcu-latency--many-writers") == 1
    assert "sync-rcu-latency--many-writers: synchronize_rcu() latency" in page
    assert "preset many-writers: 16 writer kthreads at once (rcuscale.nwriters=16)" in page
    assert "retries with git am -3, then with patch -F3 (fuzz)" in page  # the fuzz note
    assert f'href="{URL}">submit</a>' in page  # the header's link


def test_a_tree_the_user_may_not_submit_to_is_refused(client_in):
    TreeFactory.create(name="not-mine")
    response = client_in.post(URL, _fields(TreeFactory.create(name="not-mine")))
    assert response.status_code == 200
    assert (
        "not-mine is not one of the available choices" in response.context["form"].errors["tree"][0]
    )
    _nothing_stored()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"base_ref": "a..b"}, "base_ref",
         "bad base ref: ref 'a..b' is not a branch, tag or sha (optionally with ~N or ^N)"),
        ({"base_ref": "no-such-branch"}, "base_ref",
         "unknown ref 'no-such-branch' in tree linux-6.12"),
        ({"head_ref": "v6.99"}, "head_ref", "unknown ref 'v6.99' in tree linux-6.12"),
        ({"mbox": CONFLICT}, "mbox",
         "patch 1 ('rcuscale: Reword writer_holdoff description') does not apply: "
         "kernel/rcu/rcuscale.c, hunk #1 (@@ -95,7 +95,7 @@); tried git am (allow fuzz to let "
         "the build also try git am -3 and patch -F3)"),
        ({"mbox": b"not a patch\n"}, "mbox",
         "bad patch series: not an mbox: it does not start with a 'From ' line"),
        ({"min_runs": 4}, "min_runs", "at least 24 runs per side are needed, got 4"),
        ({"max_runs": 30, "min_runs": 48}, "max_runs", "max runs (30) is below min runs (48)"),
        ({"threshold_pct": -1}, "threshold_pct", "the threshold must be >= 0, got -1.0"),
        ({"cmdline_b": "nosmt"}, "cmdline_b", "side B command line: nosmt is not on the "
                                              "allow-list of boot parameters a side may set: "
                                              "rcutree.*, "),
        ({"cmdline_a": "rcuscale.shutdown=0"}, "cmdline_a",
         "side A command line: rcuscale.shutdown is set by the benchmark sync-rcu-latency "
         "itself"),
        ({"visibility": "public"}, "visibility",
         "tree linux-6.12 is not public: its comparisons are restricted"),
        ({"patch_fallback": "on"}, "patch_fallback",
         "fuzz was allowed, but there is no patch series to apply"),
    ],
    ids=["bad-ref-syntax", "unknown-base", "unknown-head", "does-not-apply", "not-an-mbox",
         "too-few-runs", "max-below-min", "negative-threshold", "cmdline-not-allowed",
         "cmdline-benchmark-own", "public-on-embargoed-tree", "fuzz-without-series"],
)  # fmt: skip
def test_each_refusal_is_beside_its_field_in_the_services_words(
    client_in, tree, change, field, message
):
    if "mbox" in change:
        change = {**change, "mbox": _mbox(change["mbox"])}
    response = client_in.post(URL, _fields(tree, **change))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field]
    (shown,) = errors[field]
    assert shown.startswith(message)  # the allow-list's names follow
    page = response.content.decode()
    # In the page, inside the field's own block.
    block = page.split(f'id="field-{field}"', 1)[1].split('<div class="field"', 1)[0]
    assert f'id="errors-{field}"' in block
    assert html.escape(shown) in block
    assert ('id="reupload"' in page) is ("mbox" in change)
    _nothing_stored()


def test_an_unknown_benchmark_would_be_the_services_refusal_too(client_in, tree):
    # The form offers the registry's benchmarks only: anything else is not a choice.
    response = client_in.post(URL, _fields(tree, benchmarks=["no-such-bench"]))
    assert "benchmarks" in response.context["form"].errors
    _nothing_stored()


def test_a_preset_is_chosen_as_a_benchmark_and_stored_by_its_name(client_in, tree):
    chosen = ["sync-rcu-latency", "sync-rcu-latency--many-writers"]
    response = client_in.post(URL, _fields(tree, benchmarks=chosen))
    assert response.status_code == 302, response.context["form"].errors
    assert Comparison.objects.get().benchmarks == chosen


def test_a_file_over_the_cap_is_too_large_and_not_kept(client_in, tree, settings):
    settings.RCUBENCH_MAX_MBOX_BYTES = 1000
    assert len(TWO_PATCHES) > 1000
    # The file first: the fields after it in the body are still read.
    data = {"mbox": _mbox(TWO_PATCHES), **_fields(tree)}
    response = client_in.post(URL, data)
    assert response.status_code == 200
    assert response.context["form"].errors == {
        "mbox": ["file too large: the mbox is more than 1000 bytes; the limit is 1000"]
    }
    assert response.context["form"].data["base_ref"] == BASE_TAG
    _nothing_stored()


def test_a_file_under_the_cap_streamed_to_disk_is_taken_whole(client_in, tree, settings):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 100  # Django writes the upload to a temp file
    response = client_in.post(URL, _fields(tree, mbox=_mbox(TWO_PATCHES)))
    assert response.status_code == 302
    series = Comparison.objects.get().revision_b.series
    assert series is not None
    assert bytes(series.mbox) == TWO_PATCHES


def test_lore_unreachable_is_a_clear_error_beside_the_message_id(client_in, tree):
    # This machine's network does not reach lore: b4 really runs and fails.
    response = client_in.post(URL, _fields(tree, message_id=NOT_REACHED))
    assert response.status_code == 200
    (error,) = response.context["form"].errors["message_id"]
    assert error.startswith(f"could not fetch {NOT_REACHED} from lore: ")
    assert "lore.kernel.org" in error  # b4's own reason
    _nothing_stored()


def test_a_malformed_message_id_is_refused_before_b4_runs(client_in, tree):
    response = client_in.post(URL, _fields(tree, message_id="--upload-pack=x@y"))
    assert response.context["form"].errors == {
        "message_id": ["'--upload-pack=x@y' is not a message-id (local-part@domain)"]
    }


def test_side_b_takes_one_source(client_in, tree):
    response = client_in.post(URL, _fields(tree, head_ref="HEAD", mbox=_mbox(TWO_PATCHES)))
    assert response.context["form"].errors == {
        "__all__": [
            "give one of head ref, mbox and message-id for side B, not head ref and "
            "patch series (mbox)"
        ]
    }
    _nothing_stored()


def test_a_series_submitted_lands_on_its_comparison_page(client_in, tree, user):
    response = client_in.post(
        URL, _fields(tree, mbox=_mbox(TWO_PATCHES), cmdline_b="rcutree.jiffies_till_first_fqs=3")
    )
    c = Comparison.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:comparison", args=[c.pk])
    # The user name, never the account's address (a public report shows it).
    assert (c.trigger, c.submitted_by_id, c.requested_by) == ("web", user.pk, "web:ada")
    assert c.visibility == "restricted"  # the tree's default
    assert (c.revision_a.ref, c.revision_b.ref) == (BASE_TAG, BASE_TAG)
    assert c.revision_b.series is not None
    assert c.revision_b.series.patches.count() == 2
    assert (c.cmdline_a, c.cmdline_b) == ("", "rcutree.jiffies_till_first_fqs=3")
    assert (c.min_runs, c.max_runs, c.threshold_pct) == (24, 96, 2.0)
    page = client_in.get(response["Location"])
    assert page.status_code == 200


def test_the_fuzz_opt_in_and_a_head_ref_are_stored(client_in, tree):
    client_in.post(URL, _fields(tree, mbox=_mbox(CONFLICT), patch_fallback="on",
                                benchmarks=["sync-rcu-latency", "boot-time"]))  # fmt: skip
    c = Comparison.objects.get()
    assert c.revision_b.patch_fallback is True  # refused by the build, not here
    assert c.benchmarks == ["sync-rcu-latency", "boot-time"]
    Comparison.objects.all().delete()
    client_in.post(URL, _fields(tree, head_ref="master"))  # the same commit, another name
    c = Comparison.objects.get()
    assert (c.revision_a.ref, c.revision_b.ref, c.revision_b.series) == (BASE_TAG, "master", None)


def test_the_csrf_token_is_still_checked(user, x86_target, tree):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(URL, _fields(tree, mbox=_mbox(TWO_PATCHES)))
    assert response.status_code == 403
    _nothing_stored()
