"""The artifact store: atomic publish, LRU pruning that spares what is in use, disk checks."""

import os
import threading
import time

import pytest

from engine.build.store import LockTimeout, NoSpace, Store, cache_key


def _publish(store: Store, name: str, size: int, used: float) -> str:
    key = cache_key(name * 40, "x86_64", "c" * 64, "gcc")
    blob = store.root / f"{name}.bin"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(b"\0" * size)
    store.publish(key, {"bzImage": blob}, {"image": "bzImage"}, limit=1 << 20)
    meta = store.artifact_dir(key) / "meta.json"
    os.utime(meta, (used, used))
    return key


def test_keys_differ_in_every_component():
    keys = {
        cache_key("a" * 40, "x86_64", "c" * 64, "gcc 12"),
        cache_key("b" * 40, "x86_64", "c" * 64, "gcc 12"),
        cache_key("a" * 40, "ppc64le", "c" * 64, "gcc 12"),
        cache_key("a" * 40, "x86_64", "d" * 64, "gcc 12"),
        cache_key("a" * 40, "x86_64", "c" * 64, "gcc 13"),
    }
    assert len(keys) == 5


def test_publish_is_atomic_and_lookup_refreshes_last_use(tmp_path):
    store = Store(tmp_path)
    key = _publish(store, "a", 10, used=1000.0)
    assert sorted(p.name for p in store.artifact_dir(key).iterdir()) == ["bzImage", "meta.json"]
    assert not list(store.artifact_dir(key).parent.glob(".*.tmp"))
    assert store.lookup(key) == {"image": "bzImage"}
    assert (store.artifact_dir(key) / "meta.json").stat().st_mtime > 1000.0
    assert store.lookup(cache_key("f" * 40, "x86_64", "c" * 64, "gcc")) is None


def test_prune_removes_least_recently_used_artifacts_first(tmp_path):
    store = Store(tmp_path)
    now = time.time()
    old = _publish(store, "a", 1000, used=now - 300)
    mid = _publish(store, "b", 1000, used=now - 200)
    new = _publish(store, "c", 1000, used=now - 100)
    store.lookup(old)  # used again just now: the oldest is now `mid`
    pruned = store.prune(max_artifact_bytes=2500, max_slots=10)
    assert pruned == [f"artifact {mid}"]
    assert store.lookup(old) is not None
    assert store.lookup(new) is not None


def test_prune_spares_an_artifact_whose_key_is_locked(tmp_path):
    store = Store(tmp_path)
    now = time.time()
    busy = _publish(store, "a", 1000, used=now - 300)
    idle = _publish(store, "b", 1000, used=now - 200)
    with store.key_lock(busy, timeout=1):
        pruned = store.prune(max_artifact_bytes=0, max_slots=10)
    assert pruned == [f"artifact {idle}"]
    assert store.lookup(busy) is not None


def test_prune_keeps_the_most_recently_used_slots(tmp_path):
    store = Store(tmp_path)
    for i, name in enumerate(["s1", "s2", "s3"]):
        (store.slot_dir(name) / "obj").mkdir(parents=True)
        with store.slot_lock(name, timeout=1):
            pass
        lock = store.locks / f"slot-{name}.lock"
        os.utime(lock, (1000.0 + i, 1000.0 + i))
    assert store.prune(max_artifact_bytes=1 << 40, max_slots=2) == ["slot s1"]
    assert sorted(p.name for p in (tmp_path / "slots").iterdir()) == ["s2", "s3"]


def test_not_enough_disk_is_no_space_naming_what_is_free(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(NoSpace, match=r"GiB free under .*, a build needs .* GiB"):
        store.ensure_free(1 << 60)
    assert store.ensure_free(1) == []


def test_a_key_lock_waits_for_its_holder_and_times_out(tmp_path):
    store = Store(tmp_path)
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with store.key_lock("k", timeout=1):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    with (
        pytest.raises(LockTimeout, match="still locked after 0 s"),
        store.key_lock("k", timeout=0.3),
    ):
        pass
    release.set()
    thread.join()
    with store.key_lock("k", timeout=1):
        pass
