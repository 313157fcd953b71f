"""Kernels travel to runner hosts: the build host's artifact server over real HTTP on
loopback, and the fetch that boots nothing it cannot vouch for (the recorded sha256)."""

import hashlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.build.artifacts import ArtifactError, fetch_image, prune_cache, serve

SECRET = "s3cret-of-this-deployment"
KEY = "ab" + "0" * 62
IMAGE = b"\x4d\x5a not really a bzImage, but bytes all the same\x00\xff" * 1000


@pytest.fixture
def store(tmp_path: Path) -> Path:
    stored = tmp_path / "artifacts" / KEY[:2] / KEY
    stored.mkdir(parents=True)
    (stored / "bzImage").write_bytes(IMAGE)
    (stored / "config").write_text("CONFIG_SMP=y\n")
    (stored / "meta.json").write_text(json.dumps({"image": "bzImage"}))
    return tmp_path / "artifacts"


@pytest.fixture
def url(store: Path) -> Iterator[str]:
    server = serve(store, "127.0.0.1", 0, SECRET)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _fetch(url: str, cache: Path, sha: str = hashlib.sha256(IMAGE).hexdigest(), **kw: str):
    args = {"base_url": url, "secret": SECRET, "cache": cache, **kw}
    return fetch_image(KEY, "bzImage", sha, **args)  # type: ignore[arg-type]


def test_an_image_is_fetched_checked_and_then_served_from_the_cache(url, store, tmp_path):
    cache = tmp_path / "cache"
    got = _fetch(url, cache)
    assert got == cache / KEY / "bzImage"
    assert got.read_bytes() == IMAGE
    assert got.stat().st_mode & 0o777 == 0o644
    (store / KEY[:2] / KEY / "bzImage").unlink()  # the build host pruned it meanwhile
    assert _fetch(url, cache).read_bytes() == IMAGE  # no request needed


def test_a_file_that_is_not_what_was_built_is_refused_and_not_kept(url, tmp_path):
    cache = tmp_path / "cache"
    wrong = hashlib.sha256(b"what the build recorded").hexdigest()
    with pytest.raises(ArtifactError, match=f"sent a file with sha256 .* not the {wrong}"):
        _fetch(url, cache, sha=wrong)
    assert [p.name for p in (cache / KEY).iterdir()] == [".lock"]  # no image, no temporary


def test_the_server_wants_the_secret(url, tmp_path):
    with pytest.raises(ArtifactError, match="401"):
        _fetch(url, tmp_path / "cache", secret="guessed")


def _status(url: str, path: str, secret: str = SECRET) -> int:
    auth = {"Authorization": f"Bearer {secret}"}
    request = urllib.request.Request(url + path, headers=auth)  # noqa: S310 -- the test's server
    try:
        with urllib.request.urlopen(request) as response:  # noqa: S310 -- the test's own server
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_only_a_keys_image_and_metadata_are_served_and_no_symlink(url, store):
    assert _status(url, f"/artifacts/{KEY}/bzImage") == 200
    assert _status(url, f"/artifacts/{KEY}/meta.json") == 200
    assert _status(url, f"/artifacts/{KEY}/config") == 404  # stored, but no runner needs it
    assert _status(url, "/artifacts/../../etc/passwd") == 404
    assert _status(url, f"/artifacts/{KEY[:-1]}/bzImage") == 404
    assert _status(url, "/artifacts/") == 404  # no listing
    image = store / KEY[:2] / KEY / "bzImage"
    image.unlink()
    image.symlink_to("/etc/passwd")
    assert _status(url, f"/artifacts/{KEY}/bzImage") == 404


def test_bad_references_and_urls_are_refused_before_any_request(tmp_path):
    sha = hashlib.sha256(IMAGE).hexdigest()
    with pytest.raises(ArtifactError, match="bad artifact reference"):
        fetch_image("../" + KEY, "bzImage", sha, base_url="http://x", secret=SECRET,
                    cache=tmp_path)  # fmt: skip
    with pytest.raises(ArtifactError, match="no recorded image checksum"):
        fetch_image(KEY, "bzImage", "", base_url="http://x", secret=SECRET, cache=tmp_path)
    with pytest.raises(ArtifactError, match="is not http"):
        fetch_image(KEY, "bzImage", sha, base_url="file:///etc", secret=SECRET, cache=tmp_path)


def test_the_cache_drops_the_least_recently_used_first(tmp_path):
    import os

    for i, key in enumerate(("a" * 64, "b" * 64, "c" * 64)):
        (tmp_path / key).mkdir()
        (tmp_path / key / "bzImage").write_bytes(b"x" * 1000)
        os.utime(tmp_path / key / "bzImage", (1000 + i, 1000 + i))
    assert prune_cache(tmp_path, 2000) == ["a" * 64]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b" * 64, "c" * 64]
