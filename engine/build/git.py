"""Git operations for builds: per-tree bare mirrors, ref resolution, checkouts.

Every call runs with hooks disabled, no fsmonitor, no terminal prompts, no system/global
config, and dangerous transports off; user-supplied revisions are validated and passed after
`--end-of-options` so none can be read as an option. Commands on a build worktree name its
git directory explicitly (`Checkout`), so git never reads the worktree's `.git` file: a file
a patch could have rewritten to point at a directory, and config, of its own.

A mirror holds a tree's branches and tags only. Forges advertise refs that anyone may create
(GitHub's `refs/pull/<n>/head`, GitLab's `refs/merge-requests/<n>/head`), so such refs are
never fetched, a name resolves only to a branch or a tag, and a build is trusted only when
its commit is `published`: reachable from a branch or tag of the tree.
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.build.sources import validate_tree_url
from engine.build.store import flocked

# Revisions as users write them: names, shas, and ~N / ^N suffixes (HEAD~3, v6.12^).
_REV = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]*(?:[~^][0-9]*)*$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
# Git sets no limit of its own, but a loose ref is a file whose name is at most 255 bytes
# (NAME_MAX), and a requested ref is stored in a 255-character column (Revision.ref).
MAX_REF_LENGTH = 255
# The refs a mirror fetches and a name may resolve to: the tree's own branches and tags.
PUBLISHED_REFS = ("refs/heads/", "refs/tags/")
REFSPECS = tuple(f"+{prefix}*:{prefix}*" for prefix in PUBLISHED_REFS)


class GitError(RuntimeError):
    """A git command failed; the message carries git's own output."""


class BadRefError(ValueError):
    """A revision that is malformed or does not name a commit in the tree."""


class UnknownRefError(BadRefError):
    """A well-formed revision that names no commit in the tree."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ASKPASS="/bin/false",
        SSH_ASKPASS="/bin/false",
        # Identity for the commits `git am` makes; dates come from the patches so the
        # resulting sha is the same every time the same series is applied to the same base.
        GIT_COMMITTER_NAME="rcubench",
        GIT_COMMITTER_EMAIL="rcubench@localhost",
    )
    return env


SAFE_CONFIG = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "protocol.file.allow=user",
    "-c", "safe.directory=*",
    "-c", "advice.detachedHead=false",
)  # fmt: skip


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    timeout: float = 600,
    check: bool = True,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = ["git", *SAFE_CONFIG]
    if git_dir is not None:
        cmd += ["--git-dir", str(git_dir)]
    if work_tree is not None:
        cmd += ["--work-tree", str(work_tree)]
    cmd += list(args)
    result = subprocess.run(
        cmd,
        cwd=cwd,
        env=_env(),
        input=stdin.decode("utf-8", "surrogateescape") if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        shown = " ".join(args[:3])
        raise GitError(f"git {shown} failed ({result.returncode}): {result.stderr.strip()}")
    return result


@dataclass(frozen=True)
class Checkout:
    """A work tree and its git directory, named explicitly on every git command."""

    path: Path
    git_dir: Path

    def git(
        self, args: Sequence[str], *, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return run_git(args, cwd=self.path, git_dir=self.git_dir, work_tree=self.path,
                       check=check, timeout=timeout)  # fmt: skip


def validate_rev(rev: str) -> str:
    """Return `rev` if it is a well-formed revision, else raise BadRefError naming the flaw."""
    if not rev:
        raise BadRefError("empty ref")
    if len(rev) > MAX_REF_LENGTH:
        raise BadRefError(
            f"ref {rev[:40]!r}... is {len(rev)} characters long; the limit is {MAX_REF_LENGTH}"
        )
    if rev.startswith("-"):
        raise BadRefError(f"ref {rev!r} starts with '-' (would be read as an option)")
    if not _REV.match(rev) or ".." in rev or "@{" in rev or rev.endswith((".lock", "/", ".")):
        raise BadRefError(f"ref {rev!r} is not a branch, tag or sha (optionally with ~N or ^N)")
    base = re.split(r"[~^]", rev, maxsplit=1)[0]
    if not _SHA.match(base) and base != "HEAD":
        ok = run_git(["check-ref-format", "--allow-onelevel", base], check=False)
        if ok.returncode != 0:
            raise BadRefError(
                f"ref {rev!r}: {base!r} is not a valid ref name (git check-ref-format)"
            )
    return rev


def mirror_path(mirrors_dir: Path, url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", url.rstrip("/").rsplit("/", 1)[-1])[:40]
    return mirrors_dir / f"{name}-{digest}.git"


def mirror_lock(mirror: Path, *, timeout: float) -> AbstractContextManager[None]:
    """Held while a mirror's refs or worktree list change."""
    return flocked(mirror.with_name(f"{mirror.name}.lock"), timeout=timeout)


def ensure_mirror(mirrors_dir: Path, url: str, *, allow_local: bool, timeout: float = 3600) -> Path:
    """A bare mirror of `url`, cloned on first use and fetched on every later use.

    A lock per mirror serialises the first clone and the fetches: concurrent builds of one
    tree would otherwise race on the new directory and on the refs. The first clone is made
    in a temporary `.<name>.XXXX` directory, removed if it fails (a local path that is not a
    git directory, say). Only branches and tags are fetched (`REFSPECS`, given on the command
    line, so no configuration can widen them); a mirror made before fetched every ref
    (`--mirror=fetch`) and is narrowed first.
    """
    validate_tree_url(url, allow_local=allow_local)
    path = mirror_path(mirrors_dir, url)
    mirrors_dir.mkdir(parents=True, exist_ok=True)
    with mirror_lock(path, timeout=timeout):
        if not (path / "HEAD").exists():
            # Under the lock, a temporary clone of this mirror (mkdtemp: 8 random characters)
            # is a killed process's leftover.
            for stale in mirrors_dir.glob(f".{path.name}.{'?' * 8}"):
                shutil.rmtree(stale, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=mirrors_dir))
            try:
                run_git(["init", "--bare", "--quiet", str(tmp)])
                run_git(["remote", "add", "origin", "--", url], git_dir=tmp)
                if url.startswith("/"):
                    # An operator's local tree stays in place: borrow its objects, not copy.
                    objects = run_git(["rev-parse", "--git-path", "objects"], git_dir=Path(url))
                    source = (Path(url) / objects.stdout.strip()).resolve()
                    (tmp / "objects" / "info" / "alternates").write_text(f"{source}\n")
                tmp.rename(path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # gone already once renamed
        _narrow(path)
        run_git(["fetch", "--quiet", "--prune", "origin", *REFSPECS], git_dir=path,
                timeout=timeout)  # fmt: skip
    return path


def _narrow(mirror: Path) -> None:
    """The mirror's remote fetches branches and tags only, and it holds no other ref: those
    an earlier `+refs/*:refs/*` brought (refs/pull/..., refs/merge-requests/...) are deleted.
    Their commits may stay in the object store until git collects them; a build of one by its
    sha is untrusted (`published`)."""
    config = run_git(["config", "--get-all", "remote.origin.fetch"], git_dir=mirror, check=False)
    if config.stdout.split() != list(REFSPECS):
        run_git(["config", "--unset-all", "remote.origin.mirror"], git_dir=mirror, check=False)
        run_git(["config", "--replace-all", "remote.origin.fetch", REFSPECS[0]], git_dir=mirror)
        run_git(["config", "--add", "remote.origin.fetch", REFSPECS[1]], git_dir=mirror)
    refs = run_git(["for-each-ref", "--format=%(refname)"], git_dir=mirror).stdout.split()
    if stray := [ref for ref in refs if not ref.startswith(PUBLISHED_REFS)]:
        deletions = "".join(f"delete {ref}\n" for ref in stray).encode()
        run_git(["update-ref", "--stdin"], git_dir=mirror, stdin=deletions)


def resolve(mirror: Path, rev: str) -> str:
    """The full sha of the commit `rev` names in the mirror (or in a tree: preflight reads
    an operator's tree itself). A name must be a branch or a tag (HEAD: the branch it
    names); a ref anyone may create on a forge (refs/pull/1/head) is refused by name."""
    validate_rev(rev)
    result = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
        git_dir=mirror,
        check=False,
    )
    if result.returncode != 0:
        raise UnknownRefError(f"ref {rev!r} does not name a commit in this tree")
    base = re.split(r"[~^]", rev, maxsplit=1)[0]
    # The ref git took the name for: empty for an object name (a sha, abbreviated or not)
    # and for a name that is both a branch and a tag; HEAD when detached (its commit is
    # then trusted only if `published`, as a sha is).
    full = run_git(
        ["rev-parse", "--verify", "--quiet", "--symbolic-full-name", "--end-of-options", base],
        git_dir=mirror, check=False,
    ).stdout.strip()  # fmt: skip
    if full and full != "HEAD" and not full.startswith(PUBLISHED_REFS):
        raise BadRefError(f"ref {rev!r}: {full} is not a branch or tag of this tree")
    if not full and not _HEX.match(base):
        raise BadRefError(f"ref {rev!r} is ambiguous (a branch and a tag): name it in full, "
                          f"refs/heads/{base} or refs/tags/{base}")  # fmt: skip
    return result.stdout.strip()


def commit_subject(git_dir: Path, sha: str) -> str:
    """The subject line of commit `sha` (how people name a commit, beside its short sha),
    or "" where git cannot say: an unknown commit, or a subject that is not UTF-8."""
    if not _SHA.match(sha):
        raise BadRefError(f"{sha!r} is not a full sha")
    try:
        done = run_git(["show", "--no-patch", "--format=%s", sha], git_dir=git_dir, check=False)
    except UnicodeDecodeError:  # the commit's bytes: left unnamed rather than guessed
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def published(mirror: Path, sha: str) -> bool:
    """Whether a branch or tag of the mirror reaches commit `sha`: the tree's own history,
    which a build may trust. A commit only a forge's refs reach, or one a patch series made,
    is not."""
    if not _SHA.match(sha):
        raise BadRefError(f"{sha!r} is not a full sha")
    # The commits `sha` reaches that no branch or tag reaches: none when it is published.
    unreached = run_git(
        ["rev-list", "--max-count=1", sha, "--not", "--branches", "--tags"], git_dir=mirror
    )
    return not unreached.stdout.strip()


@dataclass(frozen=True)
class ScratchIndex:
    """A throwaway index and object directory over a repository that is only read: git
    writes the index to `index` and new objects (a patch's blobs) to `objects`, and reads
    the repository's objects as an alternate. Nothing in `git_dir` changes, so a process
    that may only read the repository (the web app, the operator's own tree) can use it."""

    git_dir: Path
    index: Path
    objects: Path
    alternate: Path  # the repository's own object directory

    def run(
        self, args: Sequence[str], *, stdin: Path | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """The git command on bytes (a patch in any charset reaches git untouched)."""
        env = _env()
        env.update(
            GIT_INDEX_FILE=str(self.index),
            GIT_OBJECT_DIRECTORY=str(self.objects),
            GIT_ALTERNATE_OBJECT_DIRECTORIES=str(self.alternate),
            GIT_LITERAL_PATHSPECS="1",  # a path a patch names is a path, never a pattern
        )
        with open(stdin or os.devnull, "rb") as source:
            return subprocess.run(
                ["git", *SAFE_CONFIG, "--git-dir", str(self.git_dir), *args], env=env,
                stdin=source, capture_output=True, timeout=timeout, check=False,
            )  # fmt: skip

    def git(
        self, args: Sequence[str], *, stdin: Path | None = None, check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """The git command, its output as text (for messages: undecodable bytes replaced)."""
        raw = self.run(args, stdin=stdin, timeout=timeout)
        out = subprocess.CompletedProcess(
            raw.args, raw.returncode, raw.stdout.decode("utf-8", "replace"),
            raw.stderr.decode("utf-8", "replace"),
        )  # fmt: skip
        if check and out.returncode != 0:
            shown = " ".join(args[:2])
            raise GitError(f"git {shown} failed ({out.returncode}): {out.stderr.strip()}")
        return out


@contextmanager
def scratch_index(
    git_dir: Path, sha: str, paths: Sequence[str] | None = None
) -> Iterator[ScratchIndex]:
    """A ScratchIndex holding the tree of commit `sha`: only the entries at or under `paths`
    when given (reading all of a kernel's 90,000 entries takes about 0.6 s, and every `git
    apply --cached` writes the whole index again), else all of it. Removed on exit."""
    if not _SHA.match(sha):
        raise BadRefError(f"{sha!r} is not a full sha")
    with tempfile.TemporaryDirectory(prefix="rcubench-index-") as tmp:
        objects = run_git(["rev-parse", "--git-path", "objects"], git_dir=git_dir)
        alternate = (git_dir / objects.stdout.strip()).resolve()
        scratch = ScratchIndex(git_dir, Path(tmp) / "index", Path(tmp) / "objects", alternate)
        scratch.objects.mkdir()
        if paths is None:
            scratch.git(["read-tree", sha])
        else:
            found = scratch.run(["ls-tree", "-r", "-z", "--full-tree", sha, "--", *paths])
            if found.returncode != 0:
                raise GitError(f"git ls-tree failed: {found.stderr.decode('utf-8', 'replace')}")
            listing = Path(tmp) / "ls-tree"
            listing.write_bytes(found.stdout)
            scratch.git(["update-index", "-z", "--index-info"], stdin=listing)
        yield scratch
