"""Content-addressed kernel artifacts, build slots, locks and LRU pruning.

Layout under the build root:
    artifacts/<key[:2]>/<key>/   image, config, System.map, build.log, meta.json
    slots/<name>/src, obj        one worktree + object dir per (tree, arch, config)
    series/<hash>.json           base sha + mbox + fallback -> applied sha (skip `git am`)
    locks/                       flock files: one per key, one per slot
A key's directory appears atomically (renamed from a temporary directory), so a reader
never sees half an artifact; the key's lock makes concurrent requests build it once.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.build import safefile

META = "meta.json"
STALE_TMP_SECONDS = 3600.0  # a temporary dir this old belongs to a killed worker


class NoSpace(RuntimeError):
    """Not enough free disk to build, even after pruning."""


class LockTimeout(RuntimeError):
    """Another build held a lock for longer than we are willing to wait."""


def cache_key(sha: str, arch: str, config_hash: str, toolchain: str) -> str:
    return hashlib.sha256(f"{sha}\n{arch}\n{config_hash}\n{toolchain}".encode()).hexdigest()


@contextmanager
def flocked(path: Path, *, timeout: float) -> Iterator[None]:
    """Hold an exclusive flock on `path`, waiting up to `timeout` seconds for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{path.name} still locked after {timeout:.0f} s") from None
                time.sleep(0.2)
        try:
            os.utime(path)  # last use, for LRU pruning of slots
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _try_flock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


@dataclass(frozen=True)
class Store:
    root: Path

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    def artifact_dir(self, key: str) -> Path:
        return self.root / "artifacts" / key[:2] / key

    def lookup(self, key: str) -> dict[str, object] | None:
        """The stored artifact's metadata (and its last use refreshed), or None."""
        meta = self.artifact_dir(key) / META
        try:
            data: dict[str, object] = json.loads(meta.read_text())
        except FileNotFoundError:
            return None
        os.utime(meta)
        return data

    def key_lock(self, key: str, *, timeout: float) -> AbstractContextManager[None]:
        return flocked(self.locks / f"key-{key}.lock", timeout=timeout)

    def slot_lock(self, slot: str, *, timeout: float) -> AbstractContextManager[None]:
        return flocked(self.locks / f"slot-{slot}.lock", timeout=timeout)

    def slot_dir(self, slot: str) -> Path:
        return self.root / "slots" / slot

    def publish(
        self, key: str, files: dict[str, Path], meta: dict[str, object], *, limit: int
    ) -> Path:
        """Copy `files` (name -> path) and `meta` in under `key`, atomically. The files come
        from a build directory: each must be a regular file of at most `limit` bytes
        (safefile.UnsafeFile otherwise), and nothing is left behind on any failure."""
        final = self.artifact_dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{key}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            for name, src in files.items():
                safefile.copy(src, tmp / name, limit)
            (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            if final.exists():  # a pruned-and-rebuilt key, or a stale leftover: replace it
                shutil.rmtree(final)
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def series_memo(self, memo_key: str) -> dict[str, object] | None:
        try:
            data: dict[str, object] = json.loads(
                (self.root / "series" / f"{memo_key}.json").read_text()
            )
        except FileNotFoundError:
            return None
        return data

    def remember_series(self, memo_key: str, applied: dict[str, object]) -> None:
        path = self.root / "series" / f"{memo_key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(applied, sort_keys=True))
        tmp.rename(path)

    # --- limits ---------------------------------------------------------------------------
    def free_bytes(self) -> int:
        self.root.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(self.root).free

    def ensure_free(self, need: int, *, keep: Collection[str] = ()) -> list[str]:
        """Raise NoSpace unless `need` bytes are free; short of that, prune every unlocked
        artifact not in `keep` and all slots but the most recently used, then check again."""
        if self.free_bytes() >= need:
            return []
        pruned = self.prune(max_artifact_bytes=0, max_slots=1, keep=keep)
        free = self.free_bytes()
        if free < need:
            raise NoSpace(
                f"{free / 2**30:.1f} GiB free under {self.root}, a build needs "
                f"{need / 2**30:.1f} GiB (after pruning {len(pruned)} cached item(s))"
            )
        return pruned

    def prune(
        self, *, max_artifact_bytes: int, max_slots: int, keep: Collection[str] = ()
    ) -> list[str]:
        """Delete least recently used artifacts beyond `max_artifact_bytes` and slots beyond
        `max_slots`, and temporary dirs that killed workers left. Anything locked (in use)
        or in `keep` (needed by queued or running comparisons) is skipped. Returns what was
        deleted."""
        pruned = self._stale_temporaries()
        self.locks.mkdir(parents=True, exist_ok=True)
        artifacts = sorted(
            (p for p in (self.root / "artifacts").glob("??/*") if (p / META).exists()),
            key=lambda p: (p / META).stat().st_mtime,
        )
        sizes = {p: dir_bytes(p) for p in artifacts}
        total = sum(sizes.values())
        for path in artifacts:
            if total <= max_artifact_bytes:
                break
            if path.name in keep:
                continue
            fd = _try_flock(self.locks / f"key-{path.name}.lock")
            if fd is None:
                continue
            try:
                shutil.rmtree(path)
                total -= sizes[path]
                pruned.append(f"artifact {path.name}")
            finally:
                _release(fd)
        slots = sorted(
            (p for p in (self.root / "slots").glob("*") if p.is_dir()),
            key=lambda p: _mtime(self.locks / f"slot-{p.name}.lock"),
        )
        for path in slots[: max(0, len(slots) - max_slots)]:
            fd = _try_flock(self.locks / f"slot-{path.name}.lock")
            if fd is None:
                continue
            try:
                shutil.rmtree(path)
                pruned.append(f"slot {path.name}")
            finally:
                _release(fd)
        return pruned

    def _stale_temporaries(self) -> list[str]:
        cutoff = time.time() - STALE_TMP_SECONDS
        found = [
            *(self.root / "artifacts").glob("??/.*.tmp"),
            *(self.root / "series").glob("*.tmp"),
        ]
        gone = []
        for path in found:
            with contextlib.suppress(FileNotFoundError):
                if path.lstat().st_mtime < cutoff:
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink()
                    gone.append(f"temporary {path.name}")
        return gone


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
