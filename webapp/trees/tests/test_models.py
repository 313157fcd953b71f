import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from tests.support.factories import BuildFactory, TreeFactory
from webapp.states import Result, State
from webapp.trees.models import Build

pytestmark = pytest.mark.django_db


def test_a_revision_has_one_build_per_arch_and_config():
    build = BuildFactory.create()
    with pytest.raises(IntegrityError, match="build_unique_request"):
        BuildFactory.create(revision=build.revision, arch=build.arch, config_hash=build.config_hash)


def test_same_revision_other_arch_is_another_build():
    build = BuildFactory.create()
    other = BuildFactory.create(
        revision=build.revision, config_hash=build.config_hash, arch="ppc64le"
    )
    assert other.pk != build.pk


def test_two_revisions_of_one_commit_may_share_a_cache_key():
    # The artifact store builds a key once; the second row records a cache hit.
    build = BuildFactory.create()
    other = BuildFactory.create(
        sha=build.sha, config_hash=build.config_hash, toolchain=build.toolchain, cached=True
    )
    assert other.revision_id != build.revision_id


def test_build_result_only_once_done():
    with pytest.raises(IntegrityError, match="build_result_only_when_done"):
        BuildFactory.create(state=State.RUNNING, result=Result.OK)


def test_done_build_must_have_a_result():
    with pytest.raises(IntegrityError, match="build_result_only_when_done"):
        BuildFactory.create(state=State.DONE, result=Result.NONE)


def test_failed_build_names_its_error():
    with pytest.raises(IntegrityError, match="build_error_code_iff_unsuccessful"):
        BuildFactory.create(state=State.DONE, result=Result.FAILED)


def test_ok_build_has_no_error_code():
    with pytest.raises(IntegrityError, match="build_error_code_iff_unsuccessful"):
        BuildFactory.create(state=State.DONE, result=Result.OK, error_code=Build.Error.MAKE_FAILED)


def test_failed_build_with_error_code_is_stored():
    build = BuildFactory.create(state=State.DONE, result=Result.FAILED, error_code="patch-failed")
    assert Build.objects.get(pk=build.pk).error_code == "patch-failed"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ext::sh -c touch% /tmp/pwned", "remote helper"),
        ("https://example.org/linux.git --upload-pack=x", "white space"),
        ("ext::sh", "remote helper"),
        ("file:///etc", "scheme file"),
        ("--upload-pack=touch /tmp/x", "starts with '-'"),
        ("http://example.org/linux.git", "scheme http"),
    ],
)
def test_tree_refuses_unsafe_urls(url, reason):
    tree = TreeFactory.build(name="t", url=url)
    with pytest.raises(ValidationError) as exc:
        tree.full_clean()
    assert reason in str(exc.value.message_dict["url"])


def test_operator_registered_tree_may_be_a_local_path():
    TreeFactory.build(name="local", url="/srv/git/linux.git").full_clean()
