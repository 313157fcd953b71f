"""The submission-time preflight: refs resolved and the series applied (with a scratch index,
no worktree, nothing written to the tree) on the demo tree and on small repositories made
here; trees this host cannot read are skipped, and the skip is logged."""

import dataclasses
import io
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from engine.build.git import ensure_mirror, mirror_path, published, resolve, run_git, scratch_index
from engine.build.patches import PatchFailed, PatchRefused, check_series, parse_mbox
from engine.build.tests.conftest import BASE_TAG, DEFAULT_TREE, FIXTURES
from tests.support.factories import TreeFactory
from webapp.comparisons import preflight
from webapp.comparisons.models import Comparison
from webapp.comparisons.preflight import PreflightRefusal
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.trees.models import PatchSeries, Revision, Tree

pytestmark = pytest.mark.django_db

DEMO_MBOX = Path(__file__).resolve().parents[3] / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"
TWO_PATCHES = (FIXTURES / "two-patches.mbox").read_bytes()
CONFLICT = (FIXTURES / "conflict.mbox").read_bytes()
NEEDS_FUZZ = (FIXTURES / "needs-fuzz.mbox").read_bytes()


@pytest.fixture
def demo_tree() -> Tree:
    assert (DEFAULT_TREE / "HEAD").exists(), f"{DEFAULT_TREE} missing: run scripts/setup.sh"
    return TreeFactory.create(name="linux-6.12", url=str(DEFAULT_TREE))


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.org",
         "-c", "init.defaultBranch=master", *args],
        cwd=cwd, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return done.stdout.decode()


@pytest.fixture
def small(tmp_path) -> dict[str, Path | bytes]:
    """A bare repository with one commit (tag v1), and a two-patch series written on it in a
    clone: patch 1 changes lib/a.c, patch 2 adds lib/new.c and changes a.c again."""
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "--quiet", cwd=work)
    (work / "lib").mkdir()
    (work / "lib" / "a.c").write_text("".join(f"int a{i};\n" for i in range(40)))
    _git("add", ".", cwd=work)
    _git("commit", "--quiet", "-m", "base", cwd=work)
    _git("tag", "v1", cwd=work)
    _git("clone", "--quiet", "--bare", str(work), str(tmp_path / "tree.git"), cwd=tmp_path)
    (work / "lib" / "a.c").write_text(
        "".join(f"int a{i};\n" if i != 5 else "long a5;\n" for i in range(40))
    )
    _git("commit", "--quiet", "-am", "lib: Widen a5", cwd=work)
    (work / "lib" / "new.c").write_text("int fresh;\n")
    text = (work / "lib" / "a.c").read_text().replace("int a30;", "unsigned a30;")
    (work / "lib" / "a.c").write_text(text)
    _git("add", ".", cwd=work)
    _git("commit", "--quiet", "-m", "lib: Add new.c, unsign a30", cwd=work)
    mbox = _git("format-patch", "--stdout", "v1..HEAD", cwd=work).encode()
    return {"git_dir": tmp_path / "tree.git", "work": work, "mbox": mbox}


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}  # fmt: skip


# --- the engine's check (engine.build.patches.check_series) -----------------------------


def test_a_series_applies_on_a_scratch_index_and_the_repository_is_only_read(small):
    git_dir = small["git_dir"]
    before = _snapshot(git_dir)
    check_series(git_dir, resolve(git_dir, "v1"), parse_mbox(small["mbox"]))
    assert _snapshot(git_dir) == before  # no object, index or ref written


def test_the_patch_that_does_not_apply_is_named_with_its_file_and_hunk(small):
    git_dir = small["git_dir"]
    # The series twice: the second copy of patch 1 finds "long a5;" there already.
    twice = parse_mbox(small["mbox"] + small["mbox"])
    with pytest.raises(PatchFailed) as failed:
        check_series(git_dir, resolve(git_dir, "v1"), twice)
    assert (failed.value.index, failed.value.file) == (3, "lib/a.c")
    assert str(failed.value) == (
        "patch 3 ('lib: Widen a5') does not apply: lib/a.c, hunk #1 (@@ -3,7 +3,7 @@); tried git am"
    )


def test_a_patch_into_git_is_refused_before_anything_is_applied(small):
    evil = small["mbox"].replace(b"lib/new.c", b".git/hooks/post-checkout")
    with pytest.raises(PatchRefused, match=r"patch 2 .* is refused: .git/hooks/post-checkout"):
        check_series(small["git_dir"], resolve(small["git_dir"], "v1"), parse_mbox(evil))


def test_a_scratch_index_holds_only_the_paths_asked_for(small):
    sha = resolve(small["git_dir"], "v1")
    with scratch_index(small["git_dir"], sha, ["lib/a.c", "no/such/file"]) as scratch:
        listed = scratch.git(["ls-files", "--stage"]).stdout
        assert listed.count("\n") == 1
        assert listed.endswith("\tlib/a.c\n")
        index = scratch.index
    assert not index.exists()


# --- the preflight (webapp.comparisons.preflight) on the demo tree ----------------------


def test_demo_tree_refs_resolve_and_unknown_ones_are_refused_naming_the_tree(demo_tree):
    started = time.monotonic()
    preflight.check(demo_tree, BASE_TAG, head_ref=f"{BASE_TAG}~0")
    assert time.monotonic() - started < 5
    for field, base, head, bad in (("base_ref", "no-such-branch", "", "no-such-branch"),
                                   ("head_ref", BASE_TAG, "v6.99", "v6.99")):  # fmt: skip
        with pytest.raises(PreflightRefusal) as refused:
            preflight.check(demo_tree, base, head_ref=head)
        assert refused.value.field == field
        assert refused.value.message == f"unknown ref {bad!r} in tree linux-6.12"


@pytest.mark.parametrize(
    ("mbox", "fuzz", "message"),
    [
        (TWO_PATCHES, False, None),
        (DEMO_MBOX.read_bytes(), False, None),
        (CONFLICT, False, re.escape(
            "patch 1 ('rcuscale: Reword writer_holdoff description') does not apply: "
            "kernel/rcu/rcuscale.c, hunk #1 (@@ -95,7 +95,7 @@); tried git am (allow fuzz to "
            "let the build also try git am -3 and patch -F3)")),
        (NEEDS_FUZZ, False, r"patch 1 \('rcuscale: Halve the default holdoff'\) does not apply: "
                            r"kernel/rcu/rcuscale.c, hunk #1"),
        (NEEDS_FUZZ, True, None),  # the build's patch -F3 applies it
        (CONFLICT, True, None),  # refused by the build, not here: fuzz is the build's to try
    ],
    ids=["two-patches", "demo", "conflict", "needs-fuzz", "needs-fuzz-allowed",
         "conflict-fuzz-allowed"],
)  # fmt: skip
def test_the_series_check_on_the_demo_tree(demo_tree, mbox, fuzz, message):
    if message is None:
        preflight.check(demo_tree, BASE_TAG, mbox=mbox, fuzz=fuzz)
        return
    with pytest.raises(PreflightRefusal, match=message) as refused:
        preflight.check(demo_tree, BASE_TAG, mbox=mbox, fuzz=fuzz)
    assert refused.value.field == "series"


def test_the_second_copy_of_the_demo_patch_is_named_as_patch_2(demo_tree):
    once = DEMO_MBOX.read_bytes()
    twice = once + once.replace(b"demo-v2-1@", b"demo-v2-2@")
    with pytest.raises(
        PreflightRefusal,
        match=r"^patch 2 \('rcu: Wait one more jiffy .*'\) "
        r"does not apply: kernel/rcu/tree.h, hunk #1",
    ):
        preflight.check(demo_tree, BASE_TAG, mbox=twice)


def test_a_series_the_service_refuses_itself_is_left_to_it(demo_tree, settings):
    preflight.check(demo_tree, BASE_TAG, mbox=b"not an mbox")  # store_series says why
    settings.RCUBENCH_MAX_MBOX_BYTES = 100
    preflight.check(demo_tree, BASE_TAG, mbox=CONFLICT)  # too large: likewise


# --- trees this host cannot check --------------------------------------------------------


def test_a_remote_tree_without_a_mirror_here_is_skipped_and_logged(settings, tmp_path, caplog):
    settings.RCUBENCH_DATA_DIR = str(tmp_path)
    caplog.set_level("INFO")
    tree = TreeFactory.create(name="rcu")  # https://git.kernel.org/...
    preflight.check(tree, "no-such-branch", mbox=CONFLICT)
    assert not (tmp_path / "mirrors").exists()  # no clone from a request
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    assert lines[-1]["event"] == "preflight skipped"
    assert (lines[-1]["tree"], lines[-1]["reason"]) == ("rcu", "no mirror of the tree on this host")


def test_a_remote_tree_whose_mirror_cannot_be_fetched_is_skipped(settings, tmp_path, caplog):
    settings.RCUBENCH_DATA_DIR = str(tmp_path)
    caplog.set_level("INFO")
    url = "https://git.invalid/linux.git"  # no such host: the fetch fails at once
    mirror = mirror_path(tmp_path / "mirrors", url)
    run_git(["init", "--bare", "--quiet", str(mirror)])
    run_git(["remote", "add", "--mirror=fetch", "origin", "--", url], git_dir=mirror)
    preflight.check(TreeFactory.create(name="remote", url=url), "no-such-branch")
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    assert lines[-1]["event"] == "preflight skipped"
    assert lines[-1]["reason"].startswith("cannot update the mirror: git fetch")


def test_a_local_tree_missing_on_this_host_is_skipped(tmp_path):
    preflight.check(TreeFactory.create(name="gone", url=str(tmp_path / "gone.git")), "v1")


# --- through the submission service and the CLI -----------------------------------------


def _request(tree: Tree, **kw: object) -> ComparisonRequest:
    fields: dict[str, object] = {
        "tree": tree.name, "base_ref": BASE_TAG, "benchmarks": ("sync-rcu-latency",),
        "target": "qemu-x86_64", "min_runs": 24, "max_runs": 96,
    }  # fmt: skip
    return ComparisonRequest(**{**fields, **kw})  # type: ignore[arg-type]


def _nothing_stored() -> None:
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()
    assert not PatchSeries.objects.exists()


def test_the_service_refuses_beside_the_field_and_stores_nothing(demo_tree, x86_target):
    for change, field, message in (
        ({"base_ref": "no-such-branch"}, "base_ref", "unknown ref 'no-such-branch' in tree "),
        ({"head_ref": "v6.99"}, "head_ref", "unknown ref 'v6.99' in tree linux-6.12"),
        ({"series_mbox": CONFLICT}, "series", "patch 1 ('rcuscale: Reword writer_holdoff "),
    ):
        with pytest.raises(SubmissionError) as refused:
            submit_comparison(_request(demo_tree, **change))
        assert refused.value.field == field
        assert refused.value.message.startswith(message)
        _nothing_stored()
    c = submit_comparison(dataclasses.replace(_request(demo_tree), series_mbox=TWO_PATCHES))
    assert c.revision_b.series is not None
    assert c.revision_b.series.patches.count() == 2


def test_the_cli_names_its_option(demo_tree, x86_target, tmp_path):
    series = tmp_path / "conflict.mbox"
    series.write_bytes(CONFLICT)
    for args, message in (
        (["--base", "no-such-branch"], "--base: unknown ref 'no-such-branch' in tree linux-6.12"),
        (["--base", BASE_TAG, "--head", "v6.99"], "--head: unknown ref 'v6.99'"),
        (["--base", BASE_TAG, "--series", str(series)], r"--series: patch 1 \('rcuscale: "),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("compare", "--no-wait", "--tree", "linux-6.12", *args,
                         stdout=io.StringIO())  # fmt: skip
        _nothing_stored()


# --- a forge's refs (security review of 2026-11-26, #2) ----------------------------------


def test_a_pull_request_ref_is_refused_by_name_and_its_sha_is_built_untrusted(
    small, x86_target, tmp_path
):
    """The operator's tree holds refs/pull/1/head, as a clone of a GitHub tree does: anyone's
    commits. Named, it is refused beside the field; by its sha it passes (the build's mirror
    borrows the tree's objects), and the build engine finds it on no branch or tag."""
    git_dir, work = Path(small["git_dir"]), Path(small["work"])
    pull = _git("rev-parse", "HEAD", cwd=work).strip()
    _git("push", "--quiet", str(git_dir), "HEAD:refs/pull/1/head", cwd=work)
    tree = TreeFactory.create(name="forge", url=str(git_dir))
    for field in ("base_ref", "head_ref"):
        with pytest.raises(SubmissionError) as refused:
            submit_comparison(_request(tree, **{"base_ref": "v1", field: "pull/1/head"}))
        assert refused.value.field == field
        assert refused.value.message == (
            "ref 'pull/1/head': refs/pull/1/head is not a branch or tag of this tree"
        )
        _nothing_stored()
    comparison = submit_comparison(_request(tree, base_ref="v1", head_ref=pull))
    mirror = ensure_mirror(tmp_path / "mirrors", tree.url, allow_local=True)
    assert resolve(mirror, comparison.revision_b.ref) == pull
    assert not published(mirror, pull)  # builder._untrusted: "not on a branch or tag"
    assert published(mirror, resolve(mirror, comparison.revision_a.ref))
