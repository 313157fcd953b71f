"""What a bisection reads from a tree's history: the first-parent commits of a push range,
and a commit's revert as a patch that a build applies like a submitter's.

The first-parent chain is what a push brought, in the order it was merged; the commits a
merge brought in are not stepped through one by one (the merge is one position), as
`git bisect --first-parent` does.
"""

from dataclasses import dataclass
from pathlib import Path

from engine.build.git import GitError, run_git, validate_rev

_FIELD = "\x1f"  # unit separator: never in a subject or a name


class HistoryError(ValueError):
    """The range cannot be read: an unknown commit, A not an ancestor of B, or too long."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str  # "Name <address>"


def first_parent(git_dir: Path, a: str, b: str, *, limit: int) -> list[Commit]:
    """The commits of a..b along b's first parents, oldest first (b last). At most `limit`
    of them: a longer range is refused, as every step of it is a kernel build."""
    for rev in (a, b):
        validate_rev(rev)
    if run_git(["merge-base", "--is-ancestor", a, b], git_dir=git_dir, check=False).returncode:
        raise HistoryError(f"{a[:12]} is not an ancestor of {b[:12]}: no range to bisect")
    try:
        out = run_git(
            ["log", "--first-parent", "--reverse", f"--format=%H{_FIELD}%s{_FIELD}%an <%ae>",
             f"{a}..{b}", "--"],
            git_dir=git_dir,
        ).stdout  # fmt: skip
    except (GitError, UnicodeDecodeError) as exc:
        raise HistoryError(f"cannot read {a[:12]}..{b[:12]}: {exc}") from None
    commits = [Commit(*line.split(_FIELD, 2)) for line in out.splitlines() if line]
    if not commits:
        raise HistoryError(f"{a[:12]}..{b[:12]} holds no commit")
    if len(commits) > limit:
        raise HistoryError(f"{a[:12]}..{b[:12]} holds {len(commits)} first-parent commits, "
                           f"more than the {limit} a bisection takes")  # fmt: skip
    return commits


def revert_mbox(git_dir: Path, sha: str, subject: str) -> bytes:
    """Commit `sha` reverted, as a one-patch mbox (`git am` applies it): the diff from the
    commit to its first parent. Whether it applies on a later head is for the caller to
    check (preflight), as for any series."""
    validate_rev(sha)
    try:
        diff = run_git(["diff", "--binary", sha, f"{sha}^1", "--"], git_dir=git_dir).stdout
    except (GitError, UnicodeDecodeError) as exc:
        raise HistoryError(f"cannot produce the revert of {sha[:12]}: {exc}") from None
    if not diff.strip():
        raise HistoryError(f"commit {sha[:12]} changes nothing: there is nothing to revert")
    title = f'Revert "{subject}"'.replace("\n", " ")
    return (
        f"From {sha} Mon Sep 17 00:00:00 2001\n"
        "From: rcubench <rcubench@localhost>\n"
        "Date: Thu, 1 Jan 1970 00:00:00 +0000\n"
        f"Subject: [PATCH] {title}\n\n"
        f"This reverts commit {sha} (rcubench's confirmation of a bisection's culprit).\n"
        f"---\n{diff}"
    ).encode()
