"""A real reverse proxy in front of a real gunicorn, for the lockout tests: Debian's nginx
(scripts/setup.sh installs nginx-light) on a free loopback port, appending the client's
address to X-Forwarded-For as the documented TLS proxy does, and reaching gunicorn from an
address of its own (127.0.0.9), so the app sees every client arrive from the proxy. Clients
bind distinct loopback addresses (127.0.0.0/8 is all loopback on Linux): each is a
different client to nginx. Used by test_lockout_proxy.py (system: it spawns servers)."""

import contextlib
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[3]
PROXY_HOP = "127.0.0.9"  # nginx's address toward gunicorn: the REMOTE_ADDR of every request

NGINX_CONF = """\
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log;
events {{ worker_connections 64; }}
http {{
    access_log {dir}/nginx-access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_bind {hop};
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not answer /healthz:\n{tail}")
        time.sleep(0.3)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def behind_nginx(env: dict[str, str], workdir: Path) -> Iterator[int]:
    """gunicorn (webapp.wsgi, `env` on top of this process's) behind nginx; yields nginx's
    port on 127.0.0.1. Both are stopped on the way out."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    upstream, port = free_port(), free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "webapp.wsgi", "--bind", f"127.0.0.1:{upstream}",
         "--workers", "1", "--error-logfile", str(workdir / "gunicorn.log")],
        cwd=ROOT, env={**os.environ, **env}, start_new_session=True,
    )  # fmt: skip
    proxy = None
    try:
        _wait_for(upstream, web, workdir / "gunicorn.log", "gunicorn")
        conf = workdir / "nginx.conf"
        # As root, nginx's workers would switch to nobody, who cannot write the temp paths.
        user = "user root root;" if os.geteuid() == 0 else ""
        conf.write_text(NGINX_CONF.format(user=user, dir=workdir, port=port, upstream=upstream,
                                          hop=PROXY_HOP))  # fmt: skip
        proxy = subprocess.Popen(
            [nginx, "-p", str(workdir), "-c", str(conf), "-g", "daemon off;"],
            start_new_session=True,
        )
        _wait_for(port, proxy, workdir / "nginx-error.log", "nginx")
        yield port
    finally:
        if proxy is not None:
            _stop(proxy)
        _stop(web)


@dataclass(frozen=True)
class Browser:
    """A client at its own loopback address, talking to nginx on `port`."""

    address: str
    port: int

    def _request(self, method: str, path: str, body: str = "",
                 headers: dict[str, str] | None = None) -> http.client.HTTPResponse:  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                          source_address=(self.address, 0))  # fmt: skip
        conn.request(method, path, body=body, headers=headers or {})
        return conn.getresponse()

    def login(self, username: str, password: str, forged_xff: str | None = None) -> int:
        """The login form as a browser posts it (CSRF cookie and field); its status."""
        page = self._request("GET", "/accounts/login/")
        cookie = page.getheader("Set-Cookie") or ""
        match = re.search(r"csrftoken=([^;]+)", cookie)
        assert match, f"no CSRF cookie: {page.status} {cookie!r}"
        page.read()
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   "Cookie": f"csrftoken={match[1]}"}  # fmt: skip
        if forged_xff is not None:
            headers["X-Forwarded-For"] = forged_xff
        body = urlencode({"username": username, "password": password,
                          "csrfmiddlewaretoken": match[1]})  # fmt: skip
        response = self._request("POST", "/accounts/login/", body, headers)
        response.read()
        return response.status
