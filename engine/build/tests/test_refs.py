"""Which refs a mirror holds and which builds are trusted (security review of 2026-11-26, #2).

A forge advertises refs that anyone may create: GitHub's `refs/pull/<n>/head`, GitLab's
`refs/merge-requests/<n>/head`. Here a real bare repository stands in for such a forge:
branch `master`, tag `v1`, and `refs/pull/1/head` made with `git update-ref`, pointing at a
commit from "anyone" whose Makefile plants files in the object directory and the ccache.
The builds go through `build_kernel` and the real sandbox; their Makefiles stop at the first
config step, so no kernel is compiled.
"""

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.build.builder import BuildError, BuildRequest, BuildSettings, build_kernel
from engine.build.git import BadRefError, ensure_mirror, mirror_path, published, resolve, run_git

# Every config step fails, after touching a file where a later build would find it.
TRUSTED_MAKEFILE = """\
tinyconfig olddefconfig bzImage:
\t-touch $(O)/from-master $(CCACHE_DIR)/from-master
\tfalse
"""
HOSTILE_MAKEFILE = """\
tinyconfig olddefconfig bzImage:
\t-touch $(O)/planted $(CCACHE_DIR)/planted
\tfalse
"""


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.org",
         "-c", "init.defaultBranch=master", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def root() -> Iterator[Path]:
    """Under /var/tmp: the unprivileged build user must reach the slot and the ccache."""
    path = Path(tempfile.mkdtemp(prefix="rcubench-refs-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def forge(root: Path) -> dict[str, str]:
    """The bare "upstream": master (two commits), tag v1 on the first, and refs/pull/1/head
    on a commit only that ref reaches."""
    work = root / "work"
    work.mkdir()
    _git("init", "--quiet", cwd=work)
    (work / "Makefile").write_text(TRUSTED_MAKEFILE)
    _git("add", ".", cwd=work)
    _git("commit", "--quiet", "-m", "base", cwd=work)
    _git("tag", "v1", cwd=work)
    (work / "README").write_text("second\n")
    _git("add", ".", cwd=work)
    _git("commit", "--quiet", "-m", "second", cwd=work)
    master = _git("rev-parse", "HEAD", cwd=work)
    (work / "Makefile").write_text(HOSTILE_MAKEFILE)
    _git("commit", "--quiet", "-am", "Makefile: anyone's pull request", cwd=work)
    pull = _git("rev-parse", "HEAD", cwd=work)
    upstream = root / "upstream.git"
    _git("clone", "--quiet", "--bare", str(work), str(upstream), cwd=root)
    _git("update-ref", "refs/heads/master", master, cwd=upstream)
    _git("update-ref", "refs/pull/1/head", pull, cwd=upstream)
    v1 = _git("rev-parse", "v1^{commit}", cwd=upstream)
    return {"url": str(upstream), "master": master, "v1": v1, "pull": pull}


def _refs(git_dir: Path) -> list[str]:
    out = run_git(["for-each-ref", "--format=%(refname)"], git_dir=git_dir).stdout
    return sorted(out.split())


def test_the_mirror_fetches_branches_and_tags_only(root, forge):
    assert "refs/pull/1/head" in _refs(Path(forge["url"]))
    mirror = ensure_mirror(root / "mirrors", forge["url"], allow_local=True)
    assert _refs(mirror) == ["refs/heads/master", "refs/tags/v1"]
    fetch = run_git(["config", "--get-all", "remote.origin.fetch"], git_dir=mirror).stdout
    assert fetch.split() == ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
    with pytest.raises(BadRefError, match="does not name a commit"):
        resolve(mirror, "pull/1/head")


def test_a_mirror_made_with_the_old_mirror_refspec_drops_its_pull_refs(root, forge):
    # As ensure_mirror made them before: `git remote add --mirror=fetch`, +refs/*:refs/*.
    mirror = mirror_path(root / "mirrors", forge["url"])
    run_git(["init", "--bare", "--quiet", str(mirror)])
    run_git(["remote", "add", "--mirror=fetch", "origin", "--", forge["url"]], git_dir=mirror)
    run_git(["fetch", "--quiet", "origin"], git_dir=mirror)
    assert "refs/pull/1/head" in _refs(mirror)
    assert ensure_mirror(root / "mirrors", forge["url"], allow_local=True) == mirror
    assert _refs(mirror) == ["refs/heads/master", "refs/tags/v1"]
    fetch = run_git(["config", "--get-all", "remote.origin.fetch"], git_dir=mirror).stdout
    assert fetch.split() == ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
    assert run_git(["config", "remote.origin.mirror"], git_dir=mirror, check=False).stdout == ""


@pytest.mark.parametrize("name", ["pull/1/head", "refs/pull/1/head"])
def test_a_ref_outside_branches_and_tags_is_refused_by_name(forge, name):
    # The operator's own tree (preflight reads it directly) may hold such refs too.
    with pytest.raises(BadRefError, match="refs/pull/1/head is not a branch or tag"):
        resolve(Path(forge["url"]), name)
    assert resolve(Path(forge["url"]), "master") == forge["master"]
    assert resolve(Path(forge["url"]), "v1") == forge["v1"]
    assert resolve(Path(forge["url"]), "refs/tags/v1") == forge["v1"]


def test_only_what_a_branch_or_tag_reaches_is_published(root, forge):
    mirror = ensure_mirror(root / "mirrors", forge["url"], allow_local=True)
    # A local tree's mirror borrows its objects: the pull commit resolves by its sha.
    assert resolve(mirror, forge["pull"]) == forge["pull"]
    assert published(mirror, forge["master"])
    assert published(mirror, forge["v1"])
    assert not published(mirror, forge["pull"])


# --- through the build: the trusted and the untrusted path ---------------------------------


def _settings(root: Path) -> BuildSettings:
    ccache = root / "ccache"
    ccache.mkdir()
    return BuildSettings(root=root / "build", mirrors=root / "mirrors", ccache=ccache,
                         min_free_bytes=0, timeout=120)  # fmt: skip


def _build(settings: BuildSettings, url: str, ref: str) -> BuildError:
    request = BuildRequest(tree_url=url, ref=ref, arch="x86_64", allow_local=True)
    with pytest.raises(BuildError) as failed:
        build_kernel(request, settings)
    return failed.value


def _slot_obj(settings: BuildSettings) -> Path:
    (obj,) = (settings.root / "slots").glob("*/obj")
    return obj


@pytest.mark.timeout(120)
def test_a_sha_only_a_pull_ref_reaches_is_built_untrusted_and_plants_nothing(root, forge):
    settings = _settings(root)
    # master is the tree's own: its build writes the slot's objects and the ccache.
    trusted = _build(settings, forge["url"], "master")
    assert trusted.code == "make-failed"
    assert f"build of {forge['master']} for x86_64, trusted" in trusted.log
    obj = _slot_obj(settings)
    assert sorted(p.name for p in obj.iterdir()) == ["from-master"]
    assert (settings.ccache / "from-master").exists()

    hostile = _build(settings, forge["url"], forge["pull"])
    assert hostile.code == "make-failed"
    assert sorted(p.name for p in obj.iterdir()) == ["from-master"]
    assert not (settings.ccache / "planted").exists()
    assert (f"build of {forge['pull']} for x86_64, untrusted (not on a branch or tag of the "
            "tree)") in hostile.log  # fmt: skip
    assert "Read-only file system" in hostile.log  # its touch of the ccache
    assert not (obj.parent / "obj-untrusted").exists()


def test_a_pull_ref_named_is_not_built(root, forge):
    settings = _settings(root)
    refused = _build(settings, forge["url"], "pull/1/head")
    assert refused.code == "bad-ref"
    assert "'pull/1/head' does not name a commit" in refused.message
    assert not list(settings.root.glob("slots/*/obj"))
    assert not (settings.ccache / "planted").exists()
