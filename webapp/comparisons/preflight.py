"""Submission-time checks against the tree itself: do the refs name commits, does the series
apply on the base? A submitter then reads "unknown ref" or "patch 2 does not apply at
kernel/rcu/tree.c, hunk #1" beside the field at once, not in a failed build minutes later.

Which repository it reads:
- A local tree (its URL is a path; operators register those): the tree itself, read only.
  The build's mirror fetches its branches and tags, and a name resolves only to one of
  those, here as there (`engine.build.git.resolve`), so both resolve the same refs (up to
  a push in between); a sha the mirror borrows from the tree's objects but no branch or tag
  reaches (a pull request's head) passes here and is built untrusted. The web app may not
  read the build's data dir (`make up` runs it as an unprivileged user) and writes nothing
  to the tree: the series is applied to a scratch index and object directory
  (`engine.build.git.scratch_index`). On the demo tree: resolving a ref takes about 10 ms,
  checking the two-patch fixture about 0.1 s.
- A remote tree: the build's mirror on this host, fetched first (as a build would) within
  FETCH_TIMEOUT. A web host without the build data, or one that may not update the mirror,
  skips the check and says so in a log line: cloning a kernel tree takes minutes, far too
  long for a request, and the build reports the same faults later (bad-ref,
  patch-failed).

With the fuzz fallback the apply check is skipped (only the paths are checked): where plain
`git am` fails, the build tries `git am -3` and `patch -F3`, which this does not.
The series' own faults (too large, not an mbox) are left to `store_series`, which reports
them in its words.

Known gap: the scratch index holds only the paths the series names, so a patch that adds a
file where the base has a file of the same name as one of its directories passes here and
fails in the build.
"""

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from engine.build.git import (
    BadRefError,
    GitError,
    UnknownRefError,
    commit_subject,
    ensure_mirror,
    mirror_path,
    resolve,
)
from engine.build.patches import (
    PatchFailed,
    PatchRefused,
    SeriesError,
    check_series,
    parse_mbox,
    touched_paths,
)
from engine.build.sources import UnsafeSourceError
from engine.build.store import LockTimeout
from webapp import logs
from webapp.trees.models import Tree

log = logs.get(__name__)
FETCH_TIMEOUT = 30.0  # seconds a request may wait for a remote tree's mirror to update
APPLY_TIMEOUT = 60.0


class PreflightRefusal(ValueError):
    """What the tree says is wrong with the request: `field` is the request's field;
    `detail`, where there is one, git's own words (a patch's "error: patch failed: ...")."""

    def __init__(self, field: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.detail = detail


def repository(tree: Tree) -> Path | None:
    """The git directory to check `tree`'s refs in on this host, or None (logged) where
    there is none to read (see the module docstring)."""
    if tree.url.startswith("/"):
        path = Path(tree.url)
        if (path / "HEAD").is_file() and os.access(path / "objects", os.R_OK | os.X_OK):
            return path
        log.info("preflight skipped", tree=tree.name, reason=f"{path} is not readable here")
        return None
    mirrors = Path(str(settings.RCUBENCH_DATA_DIR)) / "mirrors"
    if not (mirror_path(mirrors, tree.url) / "HEAD").exists():
        log.info("preflight skipped", tree=tree.name, reason="no mirror of the tree on this host")
        return None
    try:
        return ensure_mirror(mirrors, tree.url, allow_local=False, timeout=FETCH_TIMEOUT)
    except (GitError, UnsafeSourceError, LockTimeout, OSError, subprocess.TimeoutExpired) as exc:
        log.info("preflight skipped", tree=tree.name, reason=f"cannot update the mirror: {exc}")
        return None


@dataclass(frozen=True)
class Commit:
    """A ref as the tree resolved it: its commit and that commit's subject line."""

    sha: str
    subject: str


def check(
    tree: Tree, base_ref: str, head_ref: str = "", mbox: bytes | None = None,
    *, fuzz: bool = False,
) -> dict[str, Commit]:  # fmt: skip
    """Raise PreflightRefusal for an unknown ref or a series plain `git am` would not apply
    on the base. The refs' syntax must have been checked (`validate_rev`). Returns the
    commits the refs name ({ref: Commit}; empty where there is no repository to read), for
    the revisions to record: the build resolves them again, and its answer is kept."""
    started = time.monotonic()
    git_dir = repository(tree)
    if git_dir is None:
        return {}
    base_sha = resolve_ref(git_dir, tree, base_ref, "base_ref")
    commits = {base_ref: Commit(base_sha, commit_subject(git_dir, base_sha))}
    if head_ref and head_ref not in commits:
        head_sha = resolve_ref(git_dir, tree, head_ref, "head_ref")
        commits[head_ref] = Commit(head_sha, commit_subject(git_dir, head_sha))
    series = check_applies(git_dir, base_sha, mbox, fuzz=fuzz) if mbox is not None else "none"
    log.info(
        "preflight passed", tree=tree.name, base=base_ref, base_sha=base_sha,
        head=head_ref, series=series,
        seconds=round(time.monotonic() - started, 3),
    )  # fmt: skip
    return commits


def resolve_ref(git_dir: Path, tree: Tree, ref: str, field: str) -> str:
    """The sha `ref` names in the tree, or PreflightRefusal on `field`: unknown, or not a
    branch or tag (a forge's refs/pull/1/head, say, which the build's mirror never has)."""
    try:
        return resolve(git_dir, ref)
    except UnknownRefError:
        log.info("preflight refused", tree=tree.name, field=field, ref=ref)
        raise PreflightRefusal(field, f"unknown ref {ref!r} in tree {tree.name}") from None
    except BadRefError as exc:
        log.info("preflight refused", tree=tree.name, field=field, ref=ref, reason=str(exc))
        raise PreflightRefusal(field, str(exc)) from None


def check_applies(git_dir: Path, base_sha: str, mbox: bytes, *, fuzz: bool = False) -> str:
    """PreflightRefusal on "series" where the build would refuse the series on `base_sha`:
    a path no patch may touch, or (without `fuzz`) a patch plain `git am` does not apply.
    Returns what was checked, for the log line."""
    if len(mbox) > settings.RCUBENCH_MAX_MBOX_BYTES:
        return "left to store_series"  # which refuses it, in its words
    try:
        series = parse_mbox(mbox, max_patches=settings.RCUBENCH_MAX_SERIES_PATCHES)
    except SeriesError:
        return "left to store_series"  # likewise
    try:
        if fuzz:
            for patch in series.patches:  # refused by the build whatever the fallback
                touched_paths(patch)
            return "paths only (fuzz allowed)"
        check_series(git_dir, base_sha, series, timeout=APPLY_TIMEOUT)
        return "applies"
    except PatchRefused as exc:
        log.info("preflight refused", field="series", patch=exc.index, reason=exc.hunk)
        raise PreflightRefusal("series", str(exc), exc.output) from None
    except PatchFailed as exc:
        log.info("preflight refused", field="series", patch=exc.index, file=exc.file,
                 hunk=exc.hunk)  # fmt: skip
        raise PreflightRefusal(
            "series",
            f"{exc} (allow fuzz to let the build also try git am -3 and patch -F3)",
            exc.output,
        ) from None
    except (GitError, subprocess.TimeoutExpired) as exc:  # git itself failed: the build tells
        return f"not checked: {exc}"
