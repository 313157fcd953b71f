"""Hostile patch series through the real build path (security review of 2026-11-23).

Every series here is a real mbox (the fixture two-patches.mbox with its diff replaced) and
goes through `builder.build_kernel`, as a submitter's series does: the attacks are the ones the
review reproduced against main, and each test asserts the refusal and that no host file,
secret or later build was touched.
"""

import email
import email.policy
import os
import secrets
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.build import kconfig
from engine.build.arch import profile
from engine.build.builder import BuildError, build_kernel
from engine.build.git import mirror_path
from engine.build.tests.conftest import BASE_TAG, DEFAULT_TREE, FIXTURES


def _series(diff: str, subject: str = "rcu: hostile") -> bytes:
    """The first patch of the real two-patch fixture, its diff replaced by `diff`."""
    raw = (FIXTURES / "two-patches.mbox").read_bytes().split(b"\n\nFrom ")[1]
    msg = email.message_from_bytes(b"From " + raw, policy=email.policy.default)
    body = msg.get_content()
    head = body[: body.index("diff --git")]
    msg.replace_header("Subject", f"[PATCH v2 1/2] {subject}")
    msg.set_content(head + diff)
    return (
        b"From 75451adbf4c05935ac9b8796a60d2cd170770455 Mon Sep 17 00:00:00 2001\n"
        + bytes(msg).split(b"\n", 1)[1]
    )


def _makefile_prefix(rules: str) -> str:
    """A diff that puts `rules` at the top of the kernel's Makefile (git am applies it
    cleanly to the base), so the submitter's recipes run at the config or make step."""
    added = "".join(f"+{line}\n" for line in rules.splitlines())
    n = len(rules.splitlines())
    top = subprocess.run(
        ["git", "--git-dir", str(DEFAULT_TREE), "show", f"{BASE_TAG}:Makefile"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()[:3]  # fmt: skip
    context = "".join(f" {line}\n" for line in top)
    return (
        "diff --git a/Makefile b/Makefile\n--- a/Makefile\n+++ b/Makefile\n"
        f"@@ -1,3 +1,{3 + n} @@\n{added}{context}"
    )


@pytest.fixture
def secret_file() -> Iterator[tuple[Path, str]]:
    """A root-only host file holding a secret, as /etc/rcubench.env does."""
    value = f"DJANGO_SECRET_KEY={secrets.token_hex(16)}"
    path = Path(f"/etc/rcubench-test-{secrets.token_hex(4)}.env")
    path.write_text(value + "\n")
    path.chmod(0o640)
    yield path, value
    path.unlink(missing_ok=True)


@pytest.fixture
def victim(scratch) -> Path:
    path = scratch / "victim"
    path.write_text("untouched\n")
    return path


def _slot(build_settings, request) -> Path:
    """The slot of the session's x86_64 benchmark kernel: the default tree's (other tests
    make other slots, other trees too: a watched tree's push builds in its own)."""
    arch = profile("x86_64")
    chash = kconfig.config_hash(arch, kconfig.merge(arch, request.fragments))
    tree = mirror_path(build_settings.mirrors, request.tree_url).name.removesuffix(".git")
    (slot,) = (build_settings.root / "slots").glob(f"{tree}-x86_64-{chash[:12]}")
    return slot


# --- patch application --------------------------------------------------------------------
GITDIR_ATTACK = """\
diff --git a/.git b/.git
--- a/.git
+++ b/.git
@@ -1 +1 @@
-gitdir: {old}
+gitdir: evil
diff --git a/evil/config b/evil/config
new file mode 100644
--- /dev/null
+++ b/evil/config
@@ -0,0 +1,2 @@
+[core]
+\tfsmonitor = touch {marker}
"""


@pytest.mark.parametrize("fallback", [True, False])
def test_a_patch_rewriting_the_worktree_git_file_is_refused(
    build_settings, kernel_request, scratch, fallback
):
    marker = scratch / "fsmonitor-ran"
    mbox = _series(GITDIR_ATTACK.format(old="/nowhere", marker=marker))
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=mbox, patch_fallback=fallback), build_settings)
    assert err.value.code == "patch-failed"
    assert "is refused: .git: a path inside .git" in err.value.message
    slot = _slot(build_settings, kernel_request())
    assert (slot / "src" / ".git").read_text().startswith(f"gitdir: {build_settings.mirrors}")
    assert not (slot / "src" / "evil").exists()
    # The next build in that slot runs host-side git there (checkout, clean, am).
    with pytest.raises(BuildError, match="patch 1"):
        build_kernel(
            kernel_request(mbox=(FIXTURES / "needs-fuzz.mbox").read_bytes()), build_settings
        )
    assert not marker.exists()


def test_a_traditional_diff_into_git_is_refused_before_patch_runs(
    build_settings, kernel_request, scratch
):
    # No `diff --git` line: only GNU patch (the fuzz fallback) would read these headers.
    diff = "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n [core]\n+\tfsmonitor = x\n"
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=_series(diff), patch_fallback=True), build_settings)
    assert "is refused: .git/config: a path inside .git" in err.value.message


@pytest.mark.parametrize(
    ("diff", "named", "why"),
    [
        ("diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n"
         "@@ -0,0 +1 @@\n+/etc/shadow\n\\ No newline at end of file\n", "evil",
         "it makes a symbolic link"),
        ("diff --git a/../../x b/../../x\nnew file mode 100644\n--- /dev/null\n"
         "+++ b/../../x\n@@ -0,0 +1 @@\n+x\n", "../../x", "outside the tree"),
        ('diff --git "a/\\056git/hooks/x" "b/\\056git/hooks/x"\nnew file mode 100755\n'
         '--- /dev/null\n+++ "b/\\056git/hooks/x"\n@@ -0,0 +1 @@\n+x\n', ".git/hooks/x",
         "a path inside .git"),
    ],
)  # fmt: skip
def test_symlinks_and_paths_outside_the_tree_are_refused_naming_the_file(
    build_settings, kernel_request, diff, named, why
):
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=_series(diff), patch_fallback=True), build_settings)
    assert err.value.code == "patch-failed"
    assert f"is refused: {named}: " in err.value.message
    assert why in err.value.message


def test_a_patch_whose_hunks_cancel_out_ends_instead_of_looping(build_settings, kernel_request):
    # A hunk that takes a line out and puts it back: git am stops at it ("No changes"),
    # patch -F3 applies it to no effect, and `git am --continue` can never go on (the old
    # loop ran GNU patch 4,608 times in 20 s).
    line = 'torture_param(int, holdoff, 10, "Holdoff time before test start (s)");'
    diff = (
        "diff --git a/kernel/rcu/rcuscale.c b/kernel/rcu/rcuscale.c\n"
        "--- a/kernel/rcu/rcuscale.c\n+++ b/kernel/rcu/rcuscale.c\n"
        f"@@ -91 +91 @@\n-{line}\n+{line}\n"
    )
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=_series(diff), patch_fallback=True), build_settings)
    assert err.value.code == "patch-failed"
    assert "changes nothing once applied with fuzz" in err.value.message


# --- what a build leaves behind -----------------------------------------------------------
@pytest.mark.parametrize(
    ("plant", "why"),
    [
        ("ln -sfn {secret} .config", "is a symbolic link"),
        ("rm -f .config && mkfifo .config", "is not a regular file"),
    ],
)
@pytest.mark.timeout(600)
def test_a_planted_config_is_never_followed_and_no_secret_is_read(
    x86_kernel, build_settings, kernel_request, secret_file, victim, plant, why
):
    secret, value = secret_file
    # tinyconfig runs olddefconfig too: plant only in the last one, after the fragment's
    # merge (else merge_config.sh, inside the sandbox, would read the FIFO and wait).
    recipe = (
        f"\t-cat {secret}\n"  # the sandbox has no such file: only what a build needs
        f"\tln -sfn {victim} rcubench.fragment\n"  # the old code wrote obj/rcubench.fragment
        f"\tif grep -qs CONFIG_RCU_SCALE_TEST=y .config; then {plant.format(secret=secret)}; fi\n"
    )
    mbox = _series(_makefile_prefix(f"olddefconfig:\n{recipe}"))
    trusted_obj = _slot(build_settings, kernel_request()) / "obj"
    before = sorted(p.name for p in trusted_obj.iterdir())
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=mbox), build_settings)
    assert err.value.code == "make-failed"
    assert f".config {why}; refused" in err.value.message
    assert value not in err.value.message + err.value.log
    assert "No such file or directory" in err.value.log  # the cat found nothing
    assert victim.read_text() == "untouched\n"
    # The trusted object dir never saw the untrusted build; its throwaway copy is gone.
    assert sorted(p.name for p in trusted_obj.iterdir()) == before
    assert not stat.S_ISLNK(os.lstat(trusted_obj / ".config").st_mode)
    assert not (trusted_obj.parent / "obj-untrusted").exists()


@pytest.mark.parametrize(
    ("plant", "why"),
    [
        ("ln -sfn /dev/zero System.map", "System.map is a symbolic link"),
        ("rm -f System.map && truncate -s 3G System.map", "over the limit"),
        ("rm -f System.map && mkfifo System.map", "System.map is not a regular file"),
    ],
)
@pytest.mark.timeout(600)
def test_planted_build_outputs_are_not_copied_into_the_store(
    x86_kernel, build_settings, kernel_request, plant, why
):
    # The submitter's bzImage recipe builds the real image, then plants System.map.
    tree = subprocess.run(
        ["git", "--git-dir", str(DEFAULT_TREE), "show", f"{BASE_TAG}:arch/x86/Makefile"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    at = tree.index("\t$(Q)ln -fsn ../../x86/boot/bzImage $(objtree)/arch/$(UTS_MACHINE)/boot/$@")
    lead, trail = (
        "".join(f" {line}\n" for line in part)
        for part in (tree[at - 2 : at + 1], tree[at + 1 : at + 3])
    )
    diff = (
        "diff --git a/arch/x86/Makefile b/arch/x86/Makefile\n"
        "--- a/arch/x86/Makefile\n+++ b/arch/x86/Makefile\n"
        f"@@ -{at - 1},5 +{at - 1},6 @@\n{lead}+\tcd $(objtree) && {plant}\n{trail}"
    )
    artifacts = build_settings.root / "artifacts"

    def stored() -> list[Path]:  # files and temporary dirs; an empty key-prefix dir is fine
        return sorted(p for p in artifacts.rglob("*") if p.is_file() or p.name.endswith(".tmp"))

    before = stored()
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=_series(diff)), build_settings)
    assert err.value.code == "make-failed"
    assert "the build left an unusable file" in err.value.message
    assert why in err.value.message
    assert stored() == before  # nothing published, no .tmp left
