"""The git questions a watched push asks of its tree: what a ref names, whether the previous
tested head is an ancestor of the new one (else it was a force-push), their merge base, and
(polling) the heads of a remote. Read from the tree itself where it is a local path (an
operator's tree, which the push went into), else from the build mirror on this host,
fetched first as a build would. The engine's git helpers do the work (fixed safe config,
no hooks, timeouts)."""

import os
import subprocess
from pathlib import Path

from django.conf import settings

from engine.build.git import BadRefError, GitError, ensure_mirror, run_git
from engine.build.git import resolve as git_resolve
from engine.build.sources import UnsafeSourceError, validate_tree_url
from engine.build.store import LockTimeout
from webapp.trees.models import Tree

FETCH_TIMEOUT = 600.0  # a worker's task, not a request: a kernel tree may take minutes
LS_REMOTE_TIMEOUT = 60.0


class BaselineError(RuntimeError):
    """The tree cannot answer (unreadable, unreachable, an unknown ref): the push fails
    with this message."""


def repository(tree: Tree) -> Path:
    if tree.url.startswith("/"):
        path = Path(tree.url)
        if (path / "HEAD").is_file() and os.access(path / "objects", os.R_OK | os.X_OK):
            return path
        raise BaselineError(f"tree {tree.name}: {path} is not a readable git repository here")
    mirrors = Path(str(settings.RCUBENCH_DATA_DIR)) / "mirrors"
    try:
        return ensure_mirror(mirrors, tree.url, allow_local=False, timeout=FETCH_TIMEOUT)
    except (GitError, UnsafeSourceError, LockTimeout, OSError, subprocess.TimeoutExpired) as exc:
        raise BaselineError(f"tree {tree.name}: cannot update its mirror: {exc}") from None


def resolve(repo: Path, ref: str) -> str:
    try:
        return git_resolve(repo, ref)
    except BadRefError as exc:
        raise BaselineError(str(exc)) from None


def is_ancestor(repo: Path, old: str, new: str) -> bool | None:
    """Whether `old` is an ancestor of `new`; None where the repository lacks either."""
    done = run_git(["merge-base", "--is-ancestor", old, new], git_dir=repo, check=False,
                   timeout=LS_REMOTE_TIMEOUT)  # fmt: skip
    if done.returncode in (0, 1):
        return done.returncode == 0
    return None


def merge_base(repo: Path, a: str, b: str) -> str | None:
    done = run_git(["merge-base", a, b], git_dir=repo, check=False, timeout=LS_REMOTE_TIMEOUT)
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and len(sha) == 40 else None


def ls_remote(url: str) -> dict[str, str]:
    """Every branch and tag of the tree at `url` -> its commit (peeled tags)."""
    try:
        validate_tree_url(url, allow_local=True)  # operators register trees, local ones too
        done = run_git(["ls-remote", "--heads", "--tags", "--", url], timeout=LS_REMOTE_TIMEOUT)
    except (GitError, UnsafeSourceError, subprocess.TimeoutExpired) as exc:
        raise BaselineError(f"git ls-remote {url}: {exc}") from None
    heads: dict[str, str] = {}
    for line in done.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.endswith("^{}"):  # an annotated tag, peeled: the commit it names
            heads[ref[:-3]] = sha
        elif ref not in heads:
            heads[ref] = sha
    return heads
