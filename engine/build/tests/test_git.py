import pytest

from engine.build.git import BadRefError, ensure_mirror, mirror_path, resolve, validate_rev
from engine.build.sources import UnsafeSourceError


def test_tag_branch_and_sha_resolve_to_the_same_commit(kernel_mirror, base_sha):
    assert len(base_sha) == 40
    assert resolve(kernel_mirror, "master") == base_sha
    assert resolve(kernel_mirror, base_sha[:12]) == base_sha
    assert resolve(kernel_mirror, "HEAD") == base_sha


@pytest.mark.parametrize(
    ("rev", "reason"),
    [
        ("--upload-pack=touch /tmp/pwned", "starts with '-'"),
        ("-n", "starts with '-'"),
        ("master..evil", "not a branch, tag or sha"),
        ("HEAD@{1}", "not a branch, tag or sha"),
        ("a b", "not a branch, tag or sha"),
        ("$(id)", "not a branch, tag or sha"),
        ("topic.lock", "not a branch, tag or sha"),
        ("", "empty ref"),
    ],
)
def test_malicious_or_malformed_refs_are_refused(rev, reason):
    with pytest.raises(BadRefError) as exc:
        validate_rev(rev)
    assert reason in str(exc.value)


def test_well_formed_but_missing_ref_names_the_problem(kernel_mirror):
    with pytest.raises(BadRefError, match="'no-such-branch' does not name a commit"):
        resolve(kernel_mirror, "no-such-branch")
    with pytest.raises(BadRefError, match="does not name a commit"):
        resolve(kernel_mirror, "HEAD~3")  # the imported tree has a single commit


def test_mirror_refuses_unsafe_urls_before_running_git(tmp_path):
    with pytest.raises(UnsafeSourceError, match="remote helper"):
        ensure_mirror(tmp_path, "ext::sh -c touch% /tmp/pwned", allow_local=False)
    with pytest.raises(UnsafeSourceError, match="only an operator"):
        ensure_mirror(tmp_path, "/etc", allow_local=False)
    assert not any(tmp_path.iterdir())


def test_mirror_paths_are_distinct_per_url(tmp_path):
    a = mirror_path(tmp_path, "https://git.kernel.org/a/linux.git")
    b = mirror_path(tmp_path, "https://git.kernel.org/b/linux.git")
    assert a != b
    assert a.name.startswith("linux.git-")


def test_local_tree_mirror_borrows_objects_instead_of_copying(kernel_mirror):
    alternates = (kernel_mirror / "objects" / "info" / "alternates").read_text().strip()
    assert alternates.endswith("linux-6.12.git/objects")
    assert not list((kernel_mirror / "objects" / "pack").glob("*.pack"))
