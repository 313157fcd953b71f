"""Tree + ref (+ patch series) -> a cached, sandboxed kernel image.

    mirror (git fetch) -> resolve ref -> cache lookup -> slot worktree at the sha
    -> git am the series -> Kconfig (base + fragments, verified) -> make (sandboxed, ccache)
    -> artifacts published under the content-addressed key

Each (tree, arch, config) has one persistent slot: a worktree and an object directory.
Moving the worktree to another sha rewrites only the files that differ, so make and ccache
rebuild incrementally. Failures raise BuildError with the code the Build row records.

Trust: a build of the tree's own history is trusted (operators and tree admins chose the
tree): a commit a branch or tag of its mirror reaches (`git.published`). Anything else is
not: a build that applies a submitter's patch series, since the series can change any
Makefile, and a commit only a forge's refs reach (a pull request's head, named by its sha),
which anyone may have written. Only trusted builds write the slot's object directory and
the ccache.
An untrusted build runs in a copy of the slot's object directory, thrown away afterwards,
with the ccache read-only, so nothing it plants is seen by a later build; host-side code
reads what any build wrote only through `safefile` (no symlink, FIFO or huge file followed).
"""

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.build import kconfig, safefile
from engine.build.arch import ArchProfile, ToolchainMissing, profile
from engine.build.git import (
    BadRefError,
    Checkout,
    GitError,
    commit_subject,
    ensure_mirror,
    mirror_lock,
    published,
    resolve,
    run_git,
)
from engine.build.outcomes import (
    BAD_REF,
    CONFIG_DROPPED,
    FETCH_FAILED,
    INFRA,
    MAKE_FAILED,
    NO_SPACE,
    PATCH_FAILED,
    TIMEOUT,
)
from engine.build.patches import (
    FuzzSandbox,
    PatchFailed,
    Series,
    SeriesError,
    apply_series,
    parse_mbox,
)
from engine.build.sandbox import (
    DEFAULT_BUILD_USER,
    Limits,
    Sandbox,
    SandboxUnavailable,
    StepTimeout,
    cgroup,
    oom_killed,
    run_logged,
)
from engine.build.sources import UnsafeSourceError
from engine.build.store import LockTimeout, NoSpace, Store, cache_key

GiB = 2**30
_SHA = re.compile(r"^[0-9a-f]{40}$")
_ERROR_LINE = re.compile(r"(error:|Error \d+|\*\*\*|undefined reference|No rule to make)")


class BuildError(Exception):
    def __init__(self, code: str, message: str, log: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.log = log

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass(frozen=True)
class BuildSettings:
    root: Path  # artifacts, slots, locks (see store.py)
    mirrors: Path  # one bare mirror per tree URL
    ccache: Path
    user: str | None = DEFAULT_BUILD_USER  # the sandbox drops to it when the worker is root
    timeout: float = 3600.0  # config + make, per build
    lock_timeout: float = 3 * 3600.0  # waiting for another build of the same key or slot
    min_free_bytes: int = 5 * GiB
    max_artifact_bytes: int = 20 * GiB
    max_slots: int = 6
    jobs: int = 0  # 0: one per CPU this process may use
    limits: Limits = field(default_factory=Limits)  # per build step (memory, processes, ...)
    max_output_file_bytes: int = 1 * GiB  # an image, .config or System.map copied out


@dataclass(frozen=True)
class BuildRequest:
    tree_url: str
    ref: str
    arch: str
    fragments: tuple[str, ...] = ()  # Kconfig lines the benchmarks declare
    mbox: bytes | None = None
    patch_fallback: bool = False  # allow `git am -3`, then `patch -F3`
    allow_local: bool = False  # the URL is an operator-registered tree (may be a path)


@dataclass(frozen=True)
class AppliedSeries:
    method: str  # "git am", "git am -3" or "patch -F3"
    notes: tuple[str, ...]
    subjects: tuple[str, ...]
    message_ids: tuple[str, ...]


@dataclass(frozen=True)
class BuildOutcome:
    key: str
    sha: str
    base_sha: str
    arch: str
    config_hash: str
    config_fragment: str
    toolchain: str
    artifact_dir: Path
    image: Path
    cached: bool  # True: the stored artifact was returned and make did not run
    seconds: float
    trusted: bool  # built as the tree's own history (wrote the slot's objects and ccache)
    series: AppliedSeries | None = None
    pruned: tuple[str, ...] = field(default=())
    subject: str = ""  # the subject line of base_sha, the commit the ref names

    @property
    def log_path(self) -> Path:
        return self.artifact_dir / "build.log"


Progress = Callable[[str], None]


def build_kernel(
    req: BuildRequest,
    settings: BuildSettings,
    progress: Progress | None = None,
    keep: Collection[str] = (),
) -> BuildOutcome:
    """Build the kernel `req` asks for, or return its stored artifact.

    Resolves the ref in the tree's mirror, computes the cache key (sha, arch, config hash,
    toolchain) and returns the stored artifact when the key is built already. Otherwise,
    holding a build slot: checks the ref out, applies the series (refusing paths it must
    not touch), configures and runs make in the sandbox (a submitter's series builds in a
    throwaway copy of the slot's object dir, with ccache read-only), and publishes the image
    under the key. Pruning never deletes an artifact whose key is in `keep` (those queued or
    running comparisons still need). Failures raise BuildError with their code."""
    started = time.monotonic()
    note = progress or (lambda _phase: None)
    arch = profile(req.arch)
    merged = kconfig.merge(arch, req.fragments)
    chash = kconfig.config_hash(arch, merged)
    try:
        toolchain = arch.toolchain()
    except ToolchainMissing as exc:
        raise BuildError(INFRA, str(exc)) from exc
    series = _parse_series(req.mbox)
    note("fetch")
    mirror = _mirror(req, settings)
    try:
        base_sha = resolve(mirror, req.ref)
    except BadRefError as exc:
        raise BuildError(BAD_REF, str(exc)) from exc
    subject = commit_subject(mirror, base_sha)
    store = Store(settings.root)

    def outcome(
        sha: str, meta: dict[str, object], cached: bool, pruned: Sequence[str] = ()
    ) -> BuildOutcome:
        key = cache_key(sha, arch.name, chash, toolchain)
        return BuildOutcome(
            key=key,
            sha=sha,
            base_sha=base_sha,
            arch=arch.name,
            config_hash=chash,
            config_fragment=merged,
            toolchain=toolchain,
            artifact_dir=store.artifact_dir(key),
            image=store.artifact_dir(key) / str(meta["image"]),
            cached=cached,
            seconds=time.monotonic() - started,
            trusted=meta.get("trusted") is True,
            series=_applied(meta.get("series")),
            pruned=tuple(pruned),
            subject=subject,
        )

    memo_key = _memo_key(base_sha, req) if series else ""
    memo = _remembered(store, memo_key, mirror) if series else None
    known = base_sha if series is None else str(memo["sha"]) if memo else ""
    if known and (meta := store.lookup(cache_key(known, arch.name, chash, toolchain))):
        return outcome(known, meta, cached=True)

    slot = f"{mirror.name.removesuffix('.git')}-{arch.name}-{chash[:12]}"
    try:
        with store.slot_lock(slot, timeout=settings.lock_timeout):
            slot_dir = store.slot_dir(slot)
            _remove(slot_dir / UNTRUSTED_OBJ)  # left by a worker killed mid-build
            # A series applied before is checked out as its remembered commit, not re-applied.
            src = _worktree(mirror, slot_dir / "src", known or base_sha)
            sha, applied = base_sha, None
            if series is not None:
                note("apply")
                fuzz = FuzzSandbox(slot_dir / "fuzz", settings.user, settings.limits)
                sha, applied = _apply(src, series, req, store, memo_key, memo, fuzz)
            key = cache_key(sha, arch.name, chash, toolchain)
            with store.key_lock(key, timeout=settings.lock_timeout):
                if meta := store.lookup(key):  # built by another request while we waited
                    return outcome(sha, meta, cached=True)
                pruned = store.ensure_free(settings.min_free_bytes, keep=keep)
                untrusted = _untrusted(mirror, base_sha, series)
                trusted = not untrusted
                obj = _object_dir(slot_dir, trusted=trusted)
                try:
                    files = _compile(arch, src, slot_dir, obj, untrusted, sha, merged, settings,
                                     note)  # fmt: skip
                    meta = _meta(sha, base_sha, req, arch, chash, toolchain, started, applied,
                                 trusted)  # fmt: skip
                    store.publish(key, files, meta, limit=settings.max_output_file_bytes)
                except safefile.UnsafeFile as exc:
                    raise BuildError(MAKE_FAILED, f"the build left an unusable file: {exc}",
                                     _tail(slot_dir / "build.log")) from exc  # fmt: skip
                finally:
                    if not trusted:
                        _remove(obj)
            pruned = [
                *pruned,
                *store.prune(
                    max_artifact_bytes=settings.max_artifact_bytes,
                    max_slots=settings.max_slots,
                    keep=keep,
                ),
            ]
            return outcome(sha, meta, cached=False, pruned=pruned)
    except LockTimeout as exc:
        raise BuildError(TIMEOUT, f"waited too long for another build: {exc}") from exc
    except NoSpace as exc:
        raise BuildError(NO_SPACE, str(exc)) from exc


UNTRUSTED_OBJ = "obj-untrusted"


def _untrusted(mirror: Path, base_sha: str, series: Series | None) -> str:
    """Why a build of `base_sha` (plus `series`) is untrusted, or "" when it is trusted: the
    tree's own history, no series."""
    if series is not None:
        return "patch series"
    try:
        if published(mirror, base_sha):
            return ""
    except GitError as exc:
        raise BuildError(INFRA, f"cannot tell if the tree's history has {base_sha}: {exc}") from exc
    return "not on a branch or tag of the tree"


def _object_dir(slot_dir: Path, *, trusted: bool) -> Path:
    """The slot's own object directory for a trusted build; for an untrusted one, a fresh
    copy of it (make then rebuilds only what the series changed), removed after the build."""
    own = slot_dir / "obj"
    if trusted:
        own.mkdir(parents=True, exist_ok=True)
        return own
    copy = slot_dir / UNTRUSTED_OBJ
    _remove(copy)
    if own.is_dir():
        # cp keeps mtimes, so make sees the copied objects as up to date.
        subprocess.run(["cp", "-a", "--reflink=auto", "--", str(own), str(copy)], check=True)
    else:
        copy.mkdir(parents=True)
    return copy


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)  # does not follow symlinks planted inside


def _meta(
    sha: str, base_sha: str, req: BuildRequest, arch: ArchProfile, chash: str, toolchain: str,
    started: float, applied: dict[str, object] | None, trusted: bool,
) -> dict[str, object]:  # fmt: skip
    return {
        "sha": sha,
        "base_sha": base_sha,
        "tree": req.tree_url,
        "ref": req.ref,
        "arch": arch.name,
        "config_hash": chash,
        "toolchain": toolchain,
        "image": Path(arch.image_path).name,
        "build_seconds": round(time.monotonic() - started, 1),
        "series": applied,
        "trusted": trusted,
    }


def _applied(info: object) -> AppliedSeries | None:
    if not isinstance(info, dict):
        return None
    return AppliedSeries(
        method=str(info["method"]),
        notes=tuple(info["notes"]),
        subjects=tuple(info["subjects"]),
        message_ids=tuple(info["message_ids"]),
    )


def _parse_series(mbox: bytes | None) -> Series | None:
    if mbox is None:
        return None
    try:
        return parse_mbox(mbox)
    except SeriesError as exc:
        raise BuildError(PATCH_FAILED, f"the patch series cannot be read: {exc}") from exc


def _mirror(req: BuildRequest, settings: BuildSettings) -> Path:
    try:
        return ensure_mirror(settings.mirrors, req.tree_url, allow_local=req.allow_local)
    except UnsafeSourceError as exc:
        raise BuildError(FETCH_FAILED, f"tree URL refused: {exc}") from exc
    except GitError as exc:
        raise BuildError(FETCH_FAILED, f"cannot fetch {req.tree_url}: {exc}") from exc


def _memo_key(base_sha: str, req: BuildRequest) -> str:
    mbox = hashlib.sha256(req.mbox or b"").hexdigest()
    return hashlib.sha256(f"{base_sha}\n{mbox}\n{req.patch_fallback}".encode()).hexdigest()


def _remembered(store: Store, memo_key: str, mirror: Path) -> dict[str, object] | None:
    """How this series applied on this base before (sha, method, notes), if its commit is
    still in the mirror."""
    memo = store.series_memo(memo_key)
    if not memo or not memo.get("sha"):
        return None
    exists = run_git(["cat-file", "-e", f"{memo['sha']}^{{commit}}"], git_dir=mirror, check=False)
    return memo if exists.returncode == 0 else None


def _worktree(mirror: Path, path: Path, sha: str) -> Checkout:
    """The slot's worktree, moved to `sha` (unchanged files keep their mtimes). Its git
    directory is found from the mirror's side, never from the worktree's `.git` file."""
    git_dir = _worktree_git_dir(mirror, path)
    if git_dir is None:
        _remove(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with mirror_lock(mirror, timeout=600):
            run_git(["worktree", "prune"], git_dir=mirror)
            run_git(
                ["worktree", "add", "--force", "--detach", "--", str(path), sha], git_dir=mirror
            )
        git_dir = _worktree_git_dir(mirror, path)
        if git_dir is None:
            raise BuildError(INFRA, f"git worktree add made no worktree at {path}")
        return Checkout(path, git_dir)
    checkout = Checkout(path, git_dir)
    checkout.git(["am", "--abort"], check=False)
    checkout.git(["checkout", "--quiet", "--force", "--detach", sha])
    checkout.git(["clean", "-qfdx"])
    return checkout


def _worktree_git_dir(mirror: Path, path: Path) -> Path | None:
    """The mirror's admin directory of the worktree at `path` (its `gitdir` file names the
    worktree), or None when the mirror has none."""
    for admin in sorted((mirror / "worktrees").glob("*")):
        with contextlib.suppress(OSError):
            if (admin / "gitdir").read_text().strip() == str(path / ".git"):
                return admin
    return None


def _apply(
    src: Checkout,
    series: Series,
    req: BuildRequest,
    store: Store,
    memo_key: str,
    memo: dict[str, object] | None,
    fuzz: FuzzSandbox,
) -> tuple[str, dict[str, object]]:
    """Apply the series on the worktree, or, with a memo, take the worktree (already at the
    remembered commit) as it is."""
    info: dict[str, object] = {
        "subjects": [p.subject for p in series.patches],
        "message_ids": [p.message_id for p in series.patches],
    }
    if memo:
        return str(memo["sha"]), {**info, "method": memo["method"], "notes": memo["notes"]}
    try:
        applied = apply_series(src, series, fallback=req.patch_fallback, fuzz=fuzz)
    except PatchFailed as exc:
        raise BuildError(PATCH_FAILED, str(exc), exc.output) from exc
    except SandboxUnavailable as exc:
        raise BuildError(INFRA, str(exc)) from exc
    store.remember_series(
        memo_key, {"sha": applied.sha, "method": applied.method, "notes": applied.notes}
    )
    return applied.sha, {**info, "method": applied.method, "notes": list(applied.notes)}


def _compile(
    arch: ArchProfile,
    checkout: Checkout,
    slot_dir: Path,
    obj: Path,
    untrusted: str,  # why, or "" for a trusted build
    sha: str,
    merged: str,
    settings: BuildSettings,
    note: Progress,
) -> dict[str, Path]:
    src = checkout.path
    trusted = not untrusted
    inside = slot_dir / "obj"  # where make sees the object dir, whichever it is
    settings.ccache.mkdir(parents=True, exist_ok=True)
    date = checkout.git(["log", "-1", "--format=%cD", sha]).stdout.strip()
    # The fragment is ours: written outside the object dir, bound read-only.
    fragment = slot_dir / kconfig.FRAGMENT_NAME
    fragment.unlink(missing_ok=True)
    safefile.write_text(fragment, merged)
    env = {
        "CCACHE_DIR": str(settings.ccache),
        # Paths under the slots folder hash relative, so slots share cache entries.
        "CCACHE_BASEDIR": str(slot_dir.parent),
        "CCACHE_NOHASHDIR": "1",
        # Reproducible: the same sources give the same objects, whichever slot built them.
        "KBUILD_BUILD_TIMESTAMP": date,
        "KBUILD_BUILD_USER": "rcubench",
        "KBUILD_BUILD_HOST": "rcubench",
    }
    if not trusted:  # reads what trusted builds cached, adds nothing a later build could use
        env |= {"CCACHE_READONLY": "1", "CCACHE_NOSTATS": "1", "CCACHE_TEMPDIR": "/tmp/ccache"}  # noqa: S108 (private /tmp)
    log_path = slot_dir / "build.log"
    log_path.unlink(missing_ok=True)
    deadline = time.monotonic() + settings.timeout
    phase = "config"
    with cgroup("build", settings.limits) as procs, open(log_path, "x") as log:
        sandbox = Sandbox(
            readable=(src, fragment) + (() if trusted else (settings.ccache,)),
            writable=(obj, settings.ccache) if trusted else (obj,),
            user=settings.user,
            env=env,
            limits=settings.limits,
            cgroups=procs,
            seen_as={obj: inside},
        )
        try:
            sandbox.prepare()
        except (OSError, KeyError, subprocess.CalledProcessError) as exc:
            raise BuildError(INFRA, f"cannot prepare the build sandbox: {exc}") from exc
        log.write(f"# rcubench build of {sha} for {arch.name}, "
                  f"{f'untrusted ({untrusted})' if untrusted else 'trusted'}\n")  # fmt: skip

        def step(argv: list[str]) -> int:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StepTimeout(f"no time left of the {settings.timeout:.0f} s limit")
            # Every output line reports progress: a cold make runs for minutes, and a caller
            # following it sees it move (the build service beats from its own thread).
            return run_logged(
                sandbox.command(argv, cwd=inside), log=log, timeout=remaining, shown=argv,
                on_line=lambda _line: note(phase), limits=settings.limits,
            )  # fmt: skip

        try:
            note(phase)
            kconfig.configure(step, src, inside, arch, merged, fragment, read_from=obj)
            phase = "make"
            note(phase)
            jobs = settings.jobs or len(os.sched_getaffinity(0))
            make = ["make", "-C", str(src), f"O={inside}", f"ARCH={arch.make_arch}", f"-j{jobs}"]
            if arch.cross_compile:
                make.append(f"CROSS_COMPILE={arch.cross_compile}")
            make += [f"CC=ccache {arch.cc}", "HOSTCC=ccache gcc", "LOCALVERSION="]
            status = step([*make, arch.image_target])
        except StepTimeout as exc:
            raise BuildError(TIMEOUT, f"build {exc}", _tail(log_path)) from exc
        except kconfig.ConfigDropped as exc:
            raise BuildError(CONFIG_DROPPED, str(exc), _tail(log_path)) from exc
        except kconfig.ConfigStepFailed as exc:
            raise BuildError(MAKE_FAILED, str(exc), _tail(log_path)) from exc
        except SandboxUnavailable as exc:
            raise BuildError(INFRA, str(exc)) from exc
        if status != 0 and oom_killed(procs):
            raise BuildError(MAKE_FAILED, f"make {arch.image_target} was killed at the memory "
                             f"limit of {settings.limits.memory_bytes / GiB:.1f} GiB",
                             _tail(log_path))  # fmt: skip
    if status != 0:
        raise BuildError(
            MAKE_FAILED, f"make {arch.image_target} failed:\n{_errors(log_path)}", _tail(log_path)
        )
    return {
        Path(arch.image_path).name: obj / arch.image_path,
        "config": obj / ".config",
        "System.map": obj / "System.map",
        "build.log": log_path,
    }


def _tail(path: Path, lines: int = 200, max_bytes: int = 256 * 1024) -> str:
    """The last `lines` lines of a log we wrote (its lines are capped), read from the end."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "".join(text.splitlines(keepends=True)[-lines:])


def _errors(path: Path, limit: int = 20) -> str:
    found = [line for line in _tail(path, 2000).splitlines() if _ERROR_LINE.search(line)]
    return "\n".join(found[-limit:]) or "(no error line found; see the log)"
