"""Kernels travel to the host that runs them: the build host serves its stored artifacts by
content-addressed key over HTTP, and a runner host fetches the image it needs, checks it
against the sha256 the database recorded when it was built, and keeps it in a local cache.

The server (`serve`, `python -m engine.build.artifacts`) answers only GET and HEAD of
/artifacts/<key>/<file> for a stored key (64 hex digits) and the files a runner needs (the
image named in the key's meta.json, and meta.json); every request carries the deployment's
shared secret as a bearer token (kernels of embargoed fixes are not public), compared in
constant time. It never follows a symlink. The client trusts the server for nothing: what
arrives is booted only if its sha256 is the one recorded by the build (the database, not the
server, is the trust anchor), and it lands in the cache under a temporary name first.
"""

import argparse
import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import tempfile
import urllib.error
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from engine.build.store import META, flocked

_KEY = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
_TIMEOUT = 120.0


class ArtifactError(RuntimeError):
    """The image could not be fetched, or what arrived is not what was built."""


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# --- the client: a runner host ----------------------------------------------------------


def fetch_image(
    key: str, name: str, sha256: str, *, base_url: str, secret: str, cache: Path
) -> Path:
    """The image `name` of artifact `key`, from the local cache or fetched from `base_url`
    and checked against `sha256`. Raises ArtifactError naming what went wrong."""
    if not _KEY.fullmatch(key) or "/" in name or name in ("", ".", ".."):
        raise ArtifactError(f"bad artifact reference {key!r}/{name!r}")
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ArtifactError(f"build {key[:12]} has no recorded image checksum")
    dest = cache / key / name
    if dest.exists() and file_sha256(dest) == sha256:
        os.utime(dest)  # recently used: kept by the pruning
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with flocked(dest.parent / ".lock", timeout=600):
        if dest.exists() and file_sha256(dest) == sha256:
            return dest
        if not base_url.startswith(("http://", "https://")):
            raise ArtifactError(f"the artifact URL {base_url!r} is not http(s)")
        url = f"{base_url.rstrip('/')}/artifacts/{key}/{name}"
        auth = {"Authorization": f"Bearer {secret}"}
        request = urllib.request.Request(url, headers=auth)  # noqa: S310 -- http(s), checked
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{name}.")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                try:
                    with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:  # noqa: S310 -- http(s)
                        shutil.copyfileobj(response, out, _CHUNK)
                except urllib.error.HTTPError as exc:
                    raise ArtifactError(f"{url}: {exc.code} {exc.reason}") from exc
                except (urllib.error.URLError, OSError) as exc:
                    raise ArtifactError(f"{url}: {getattr(exc, 'reason', exc)}") from exc
            got = file_sha256(tmp)
            if got != sha256:
                raise ArtifactError(f"{url} sent a file with sha256 {got}, not the {sha256} "
                                    f"recorded when it was built")  # fmt: skip
            tmp.chmod(0o644)  # QEMU's user reads it
            tmp.rename(dest)
        finally:
            tmp.unlink(missing_ok=True)
    return dest


def prune_cache(cache: Path, limit_bytes: int) -> list[str]:
    """Drop the least recently used artifacts of the cache past `limit_bytes`."""
    entries = []
    for d in cache.iterdir() if cache.exists() else ():
        files = [f for f in d.iterdir() if f.is_file() and not f.name.startswith(".")]
        if _KEY.fullmatch(d.name) and files:
            used = max(f.stat().st_mtime for f in files)
            entries.append((used, d, sum(f.stat().st_size for f in files)))
    total = sum(size for _, _, size in entries)
    dropped = []
    for _, d, size in sorted(entries):
        if total <= limit_bytes:
            break
        shutil.rmtree(d, ignore_errors=True)
        total -= size
        dropped.append(d.name)
    return dropped


# --- the server: the build host ---------------------------------------------------------


def _handler(artifacts: Path, secret: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "rcubench-artifacts"

        def do_GET(self) -> None:  # http.server's name
            self._serve(body=True)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the runner logs what it fetched; no stderr line per request

        def _serve(self, *, body: bool) -> None:
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if not hmac.compare_digest(token.encode(), secret.encode()):
                self.send_error(HTTPStatus.UNAUTHORIZED, "a bearer token is required")
                return
            path = self._path()
            if path is None:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            with os.fdopen(fd, "rb") as f:
                info = os.fstat(f.fileno())
                if not stat.S_ISREG(info.st_mode):
                    self.send_error(HTTPStatus.NOT_FOUND)
                    return
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(info.st_size))
                self.end_headers()
                if body:
                    shutil.copyfileobj(f, self.wfile, _CHUNK)

        def _path(self) -> Path | None:
            parts = self.path.split("?")[0].split("/")
            if len(parts) != 4 or parts[:2] != ["", "artifacts"] or not _KEY.fullmatch(parts[2]):
                return None
            key, name = parts[2], parts[3]
            stored = artifacts / key[:2] / key
            try:
                meta = json.loads((stored / META).read_text())
            except (OSError, ValueError):
                return None
            return stored / name if name in (META, meta.get("image")) else None

    return Handler


def serve(artifacts: Path, bind: str, port: int, secret: str) -> ThreadingHTTPServer:
    """A server of the store's artifacts (call serve_forever on it, or shutdown)."""
    if len(secret) < 16:
        raise ValueError("the artifact secret must have at least 16 characters")
    return ThreadingHTTPServer((bind, port), _handler(artifacts, secret))


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the build store's artifacts.")
    parser.add_argument(
        "--artifacts",
        type=Path,
        required=True,
        help="the store's artifacts directory (<data dir>/build/artifacts)",
    )
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)  # fmt: skip
    args = parser.parse_args()
    secret = os.environ.get("RCUBENCH_ARTIFACT_SECRET", "")
    server = serve(args.artifacts, args.bind, args.port, secret)
    print(f"serving {args.artifacts} on http://{args.bind}:{args.port}/artifacts/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
