"""A push range's first-parent commits and a commit's revert (engine/build/history.py), on a
real git repository made here: a main line with a merged side branch."""

import subprocess
from pathlib import Path

import pytest

from engine.build.history import HistoryError, first_parent, revert_mbox


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "Dev One", "GIT_AUTHOR_EMAIL": "dev@example.org",
           "GIT_COMMITTER_NAME": "Dev One", "GIT_COMMITTER_EMAIL": "dev@example.org",
           "GIT_AUTHOR_DATE": "2026-11-27T00:00:00Z", "GIT_COMMITTER_DATE": "2026-11-27T00:00:00Z",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def commit(repo: Path, name: str, text: str, subject: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """base -> one -> merge of side (two commits) -> three; the shas of base, one, the
    merge and three."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    base = commit(r, "tree.c", "int a;\nint b;\nint c;\n", "base")
    one = commit(r, "tree.c", "int a;\nint b = 1;\nint c;\n", "rcu: one")
    git(r, "checkout", "-q", "-b", "side", base)
    commit(r, "update.c", "x\n", "side: first")
    commit(r, "update.c", "y\n", "side: second")
    git(r, "checkout", "-q", "main")
    git(r, "merge", "-q", "--no-ff", "-m", "Merge branch 'side'", "side")
    merge = git(r, "rev-parse", "HEAD")
    three = commit(r, "sync.c", "z\n", "rcu: three")
    return r / ".git", [base, one, merge, three]


def test_the_range_is_the_first_parent_chain_oldest_first(repo):
    git_dir, (base, one, merge, three) = repo
    commits = first_parent(git_dir, base, three, limit=10)
    assert [c.sha for c in commits] == [one, merge, three]  # the side branch is one position
    assert [c.subject for c in commits] == ["rcu: one", "Merge branch 'side'", "rcu: three"]
    assert commits[0].author == "Dev One <dev@example.org>"


def test_a_range_that_is_not_one_is_refused(repo):
    git_dir, (base, one, _, three) = repo
    with pytest.raises(HistoryError, match="is not an ancestor"):
        first_parent(git_dir, three, base, limit=10)
    with pytest.raises(HistoryError, match="holds no commit"):
        first_parent(git_dir, one, one, limit=10)
    with pytest.raises(HistoryError, match="holds 3 first-parent commits, more than the 2"):
        first_parent(git_dir, base, three, limit=2)


def test_a_revert_is_a_patch_git_am_applies_on_head(repo, tmp_path):
    git_dir, (_, one, _, three) = repo
    mbox = revert_mbox(git_dir, one, "rcu: one")
    assert b'Subject: [PATCH] Revert "rcu: one"' in mbox
    work = git_dir.parent
    git(work, "checkout", "-q", three)
    (tmp_path / "revert.mbox").write_bytes(mbox)
    git(work, "am", "-q", str(tmp_path / "revert.mbox"))
    assert (work / "tree.c").read_text() == "int a;\nint b;\nint c;\n"
    assert (work / "sync.c").exists()  # the rest of head stays
