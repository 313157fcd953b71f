"""Where a run finds its kernel: the local build store, or the build host's artifact
server by key, checked against the sha256 the build recorded (real HTTP on loopback)."""

import hashlib
import json
import threading

import pytest

from engine.build.artifacts import ArtifactError, serve
from tests.support.factories import BuildFactory
from webapp.trees.services import kernel_image

pytestmark = pytest.mark.django_db
KEY = "cd" * 32
IMAGE = b"kernel bytes" * 4096


@pytest.fixture
def build_host(tmp_path):
    stored = tmp_path / "build-host" / "artifacts" / KEY[:2] / KEY
    stored.mkdir(parents=True)
    (stored / "bzImage").write_bytes(IMAGE)
    (stored / "meta.json").write_text(json.dumps({"image": "bzImage"}))
    server = serve(stored.parents[1], "127.0.0.1", 0, "a-long-enough-secret")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield stored, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _build(artifact_dir: str):
    return BuildFactory.create(
        artifact_key=KEY, artifact_dir=artifact_dir, image_name="bzImage",
        image_sha256=hashlib.sha256(IMAGE).hexdigest(),
    )  # fmt: skip


def test_the_build_hosts_own_store_is_read_in_place(build_host, settings):
    stored, _ = build_host
    settings.RCUBENCH_ARTIFACT_URL = ""
    assert kernel_image(_build(str(stored))) == stored / "bzImage"


def test_a_runner_elsewhere_fetches_the_kernel_into_its_cache(build_host, settings, tmp_path):
    _, url = build_host
    settings.RCUBENCH_DATA_DIR = str(tmp_path / "runner")
    settings.RCUBENCH_ARTIFACT_URL, settings.RCUBENCH_ARTIFACT_SECRET = url, "a-long-enough-secret"
    build = _build("/var/lib/rcubench/build/artifacts/cd/not-on-this-host")
    image = kernel_image(build)
    assert image == tmp_path / "runner" / "artifact-cache" / KEY / "bzImage"
    assert image.read_bytes() == IMAGE


def test_a_runner_elsewhere_without_a_build_host_says_so(settings):
    settings.RCUBENCH_ARTIFACT_URL = ""
    build = _build("/nonexistent/artifacts/cd/x")
    with pytest.raises(ArtifactError, match=r"is not on this host .* RCUBENCH_ARTIFACT_URL names"):
        kernel_image(build)
