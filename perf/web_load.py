"""The web app under load (issue 16): latency of its pages and API at 10 concurrent clients.

With 1,000 comparisons, 100,000 runs and their measurements in the database, it measures
per URL kind the latency (p50/p95/p99, ms, client clock: request sent to body read) of
    list             /comparisons/ (50 rows a page, each with its progress)
    list (filtered)  /comparisons/?tree=...&state=done&benchmark=sync-rcu-latency
    report           /comparisons/<id>/ of done comparisons with 100 runs: the verdict
                     table and the figures drawn from every sample (ECDFs, strip plots,
                     histograms), the runs table
    api list         /api/v1/comparisons/ (skipped, with a line saying so, where the API
                     is not there)
    run              /runs/<id>/ (console excerpt, the metrics the parser read)
first as an anonymous client, then logged in as a member of the restricted tree (a real
login POST with the form's CSRF token), who also sees restricted rows: then the report and
run pages are restricted ones. The URL kinds run one after another, each with N requests
(after a warm-up) spread over C client threads (requests.Session each) hammering the app
back to back. Target (issue 16): p95 < 200 ms for each.

The app is served as production serves it: gunicorn with webapp.wsgi (sync workers, 3 as
in the Dockerfile; `make up` uses 2: --workers; database connections kept 60 s, as
webapp/wsgi.py sets unless DATABASE_CONN_MAX_AGE says otherwise), DEBUG off, on 127.0.0.1
at a free port, against the seeded database; it is stopped at the end. Its API throttle
rates are raised out of the way (they would answer 429 after 120 anonymous requests a
minute) and its throttle counters and broker ping use their own Redis database
(--redis-url), so a `make up` on the same machine is not disturbed. After the load, each
URL kind is requested 3 times more in-process (Django's test client): its SQL queries, and
its time alone (no HTTP, nothing queued before it). At C clients on K cores a request
waits for about C/K others, so p95 < 200 ms at 10 clients on 2 cores needs roughly 40 ms
alone or less.

Seeding (perf/_web_seed.py, with the runs and verdicts of perf/_web_synthetic.py;
idempotent: skipped when the database already holds this scale's seed): the database
(default rcubench_perf) is created if missing and migrated; then, in one
transaction: 4 trees (one restricted: its comparisons are visible to members only), a
member and 5 submitters, 1,000 comparisons of 100 runs each (both sides, ABBA order; a mix
of states, verdicts, targets, benchmarks, patch series, command-line comparisons), runs
with a real captured console (benchmarks/sync_rcu_latency/fixtures, ~20 kB, its
writer-duration lines rewritten with the run's samples), every metric of every ok run as
the run service stores it (writer_duration: 101 raw samples), failed and replaced runs,
and for done comparisons the MetricVerdict rows the statistics engine stores (computed by
the real engine on synthetic data of the same shape, 5 statistics per latency metric).
Then VACUUM ANALYZE. It prints how long seeding took and the database's size.

The numbers depend on the machine: run it on an otherwise idle one (the load average at
the start is printed; the clients share the machine's CPUs with gunicorn and PostgreSQL).
Run: .venv/bin/python perf/web_load.py [--clients 10] [--requests 200] [--workers 3]
        [--seed-only | --no-seed] [--database-url postgres://.../rcubench_perf]
Exit status: 0 every kind met the target, 3 some missed it, 1 a request failed or the
set-up did.
"""

import argparse
import contextlib
import itertools
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perf._local import broker_url, database_url

DEFAULT_DATABASE_URL = database_url("rcubench_perf")
DEFAULT_REDIS_URL = broker_url(13)  # 0 broker, 1 API cache, 14-15 tests
TARGET_P95_MS = 200.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL,
                        help="the served app's broker and API throttle cache")  # fmt: skip
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--seed-only", action="store_true", help="seed, do not measure")
    mode.add_argument("--no-seed", action="store_true", help="reuse the seeded database")
    parser.add_argument("--comparisons", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100, help="per comparison, both sides")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--requests", type=int, default=200, help="per URL kind and user")
    parser.add_argument("--warmup", type=int, default=None, help="default: 2 x clients")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    args = parser.parse_args()
    if args.comparisons < 2 or args.runs < 2:
        parser.error("at least 2 comparisons of 2 runs")
    if args.warmup is None:
        args.warmup = 2 * args.clients
    return args


ARGS = parse_args()
# Before Django reads its settings: the seeded database, plain HTTP on loopback (as
# `make up`), DEBUG off (as production), the app's Redis out of the way of a `make up`.
os.environ.update({
    "DATABASE_URL": ARGS.database_url, "DJANGO_HTTPS": "false", "DJANGO_DEBUG": "false",
    "CELERY_BROKER_URL": ARGS.redis_url, "RCUBENCH_API_CACHE_URL": ARGS.redis_url,
    "RCUBENCH_API_ANON_RATE": "1000000/min", "RCUBENCH_API_USER_RATE": "1000000/min",
})  # fmt: skip
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
# Database connections kept as the web server keeps them (webapp/wsgi.py), for the
# in-process requests too; DATABASE_CONN_MAX_AGE=0 in the environment measures both
# with a new connection per request.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "60")
# The server logs as production does (INFO, to its file); this process only its warnings.
SERVER_LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
os.environ["LOG_LEVEL"] = "WARNING"

import django
import psycopg
import requests
from psycopg import sql


def ensure_database(url: str) -> None:
    """Create the database named by `url` if it does not exist."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        print(f"created database {name}")


ensure_database(ARGS.database_url)
subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
django.setup()

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Count
from django.test import Client
from django.test.utils import CaptureQueriesContext

from perf._web_seed import MEMBER, MEMBER_PASSWORD, database_size, seed, seeded
from perf._web_synthetic import SYNC
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, ComparisonState, Measurement, Run
from webapp.states import Result

# --- serving -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def gunicorn(workers: int, logs: Path) -> Iterator[str]:
    """The app as production serves it, on a free loopback port; stopped on the way out."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "RCUBENCH_LOG_FILE": str(logs / "web.log"), "LOG_LEVEL": SERVER_LOG_LEVEL}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "webapp.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--access-logfile", str(logs / "access.log"),
         "--error-logfile", str(logs / "gunicorn.log")],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = requests.get(f"{base}/healthz", timeout=10)
                health = r.json()
                if not health.get("checks", {}).get("database", {}).get("ok"):
                    sys.exit(f"/healthz: the database is not reachable: {health}")
                print(f"gunicorn: {workers} workers at {base}; /healthz {r.status_code} {health}")
                break
            except requests.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (logs / "gunicorn.log").read_text()[-3000:]
                    sys.exit(f"gunicorn did not answer /healthz:\n{log}")
                time.sleep(0.3)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# --- load --------------------------------------------------------------------------------


@dataclass
class URLKind:
    name: str
    user: str  # anon, member
    urls: list[str]
    marker: bytes | None = None  # in every good response's body
    latencies: list[float] = field(default_factory=list)  # ms, good responses
    errors: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    queries: int | None = None
    alone_ms: float | None = None  # in-process, one request at a time


def hammer(kind: URLKind, base: str, sessions: list[requests.Session], n: int,
           record: bool) -> None:  # fmt: skip
    """n requests of `kind`'s URLs (in turn), by len(sessions) clients back to back."""
    counter = itertools.count()
    lock = threading.Lock()

    def client(s: requests.Session) -> None:
        while (i := next(counter)) < n:
            url = kind.urls[i % len(kind.urls)]
            started = time.perf_counter()
            error, body = None, b""
            try:
                r = s.get(base + url, timeout=120, allow_redirects=False)
                body = r.content
                if r.status_code != 200:
                    error = f"{r.status_code} {url}"
                elif kind.marker is not None and kind.marker not in body:
                    error = f"200 without {kind.marker.decode()!r}: {url}"
            except requests.RequestException as exc:
                error = f"{type(exc).__name__} {url}"
            ms = (time.perf_counter() - started) * 1000
            if record:
                with lock:
                    if error:
                        kind.errors.append(error)
                    else:
                        kind.latencies.append(ms)
                        kind.sizes.append(len(body))

    threads = [threading.Thread(target=client, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def login(base: str) -> requests.cookies.RequestsCookieJar:
    """The member's session: the login form's CSRF token, then the real POST."""
    s = requests.Session()
    form = s.get(f"{base}/accounts/login/", timeout=60)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    if form.status_code != 200 or token is None:
        sys.exit(f"login form: {form.status_code}, no CSRF token")
    r = s.post(f"{base}/accounts/login/", timeout=60, allow_redirects=False,
               data={"username": MEMBER, "password": MEMBER_PASSWORD,
                     "csrfmiddlewaretoken": token.group(1)},
               headers={"Referer": f"{base}/accounts/login/"})  # fmt: skip
    if r.status_code != 302 or "sessionid" not in s.cookies:
        sys.exit(f"login as {MEMBER} failed: {r.status_code}")
    return s.cookies


def sessions(
    clients: int, cookies: requests.cookies.RequestsCookieJar | None
) -> list[requests.Session]:
    out = []
    for _ in range(clients):
        s = requests.Session()
        if cookies is not None:
            s.cookies.update(cookies)
        out.append(s)
    return out


def done_with_all_runs(visibility: str, runs: int, count: int) -> list[int]:
    """Done comparisons of sync-rcu-latency alone with every scheduled run in place."""
    qs = (Comparison.objects.filter(state=ComparisonState.DONE, result=Result.OK,
                                    visibility=visibility, benchmarks=[SYNC])
          .annotate(n=Count("runs")).filter(n=runs).order_by("-pk"))  # fmt: skip
    return list(qs.values_list("pk", flat=True)[:count])


def url_kinds(runs: int, api: bool) -> list[URLKind]:
    rng = random.Random(0)  # noqa: S311 - which pages to ask for
    out = []
    for user, visibility, tree in (("anon", "public", "rcu"), ("member", "restricted", "embargo")):
        reports = done_with_all_runs(visibility, runs, 5)
        if not reports:
            sys.exit(f"no done {visibility} comparison with {runs} runs: seed again")
        run_pks = list(Run.objects.filter(comparison_id__in=reports, result=Result.OK)
                       .values_list("pk", flat=True))  # fmt: skip
        rng.shuffle(run_pks)
        out += [
            URLKind("list", user, ["/comparisons/"]),
            URLKind("list (filtered)", user,
                    [f"/comparisons/?tree={tree}&state=done&benchmark={SYNC}"]),
            URLKind("report", user, [f"/comparisons/{pk}/" for pk in reports], b"Plotly.newPlot"),
            URLKind("api list", user, ["/api/v1/comparisons/"] if api else [], b'"results"'),
            URLKind("run", user, [f"/runs/{pk}/" for pk in run_pks[:20]], b"writer-duration"),
        ]  # fmt: skip
    return out


def count_queries(kinds: list[URLKind]) -> dict[str, int]:
    """Each kind's SQL queries and its time alone: 3 requests in-process (Django's test
    client: no HTTP, no other request waiting), the queries of the last, the median time.
    Also the API list's queries at 5 and 50 rows a page: the same count for both means no
    query per row."""
    anon, member = Client(HTTP_HOST="127.0.0.1"), Client(HTTP_HOST="127.0.0.1")
    member.force_login(User.objects.get(username=MEMBER),
                       backend="django.contrib.auth.backends.ModelBackend")  # fmt: skip
    extra = {}
    for kind in kinds:
        if not kind.urls:
            continue
        times = []
        for _ in range(3):
            with CaptureQueriesContext(connection) as ctx:
                started = time.perf_counter()
                (anon if kind.user == "anon" else member).get(kind.urls[0])
                times.append((time.perf_counter() - started) * 1000)
        kind.queries, kind.alone_ms = len(ctx.captured_queries), statistics.median(times)
    for rows in (5, 50):
        with CaptureQueriesContext(connection) as ctx:
            r = anon.get(f"/api/v1/comparisons/?page_size={rows}")
        if r.status_code == 200:
            extra[f"api list, {rows} rows"] = len(ctx.captured_queries)
    return extra


def percentile(values: list[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def measure(args: argparse.Namespace) -> int:
    runs_total = Run.objects.count()
    comparisons = Comparison.objects.count()
    per = Comparison.objects.annotate(n=Count("runs")).values_list("n", flat=True)
    runs = max(per) if per else 0
    load = os.getloadavg()
    print(f"database: {comparisons} comparisons, {runs_total} runs, "
          f"{Measurement.objects.count()} measurements, {MetricVerdict.objects.count()} "
          f"verdict rows, {database_size()}")  # fmt: skip
    print(f"machine: {os.cpu_count()} CPUs, load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; the machine is shared and noisy: "
          f"these numbers are only as quiet as it was")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rcubench-web-load-") as tmp, \
            gunicorn(args.workers, Path(tmp)) as base:  # fmt: skip
        api = requests.get(f"{base}/api/v1/comparisons/?page_size=1", timeout=60)
        has_api = api.status_code == 200 and "results" in api.text
        kinds = url_kinds(runs, has_api)
        cookies = login(base)
        member_api = sessions(1, cookies)[0].get(f"{base}/api/v1/comparisons/?page_size=1",
                                                 timeout=60)  # fmt: skip
        if has_api:
            print(f"visible comparisons (API count): anonymous {api.json()['count']}, "
                  f"member {member_api.json()['count']}")  # fmt: skip
        else:
            print(f"api list: skipped, /api/v1/comparisons/ answered {api.status_code}")
        print(
            f"load: {args.clients} clients, {args.requests} requests per URL kind after "
            f"{args.warmup} warm-up requests; gunicorn sync workers: {args.workers}"
        )
        pools = {"anon": sessions(args.clients, None), "member": sessions(args.clients, cookies)}
        for kind in kinds:
            if not kind.urls:
                continue
            hammer(kind, base, pools[kind.user], args.warmup, record=False)
            t = time.monotonic()
            hammer(kind, base, pools[kind.user], args.requests, record=True)
            print(f"  {kind.name} ({kind.user}): {time.monotonic() - t:.1f} s", flush=True)
        load_end = os.getloadavg()
    extra = count_queries(kinds)
    print(f"load average at the end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print("\nlatency at the clients, ms; alone: the same request in-process, one at a time "
          "(no HTTP, no queueing), ms;\nqueries: SQL queries of one request")  # fmt: skip
    print(f"{'URL kind':16} {'user':6} {'requests':>8} {'errors':>6} {'p50 ms':>8} "
          f"{'p95 ms':>8} {'p99 ms':>8} {'alone':>6} {'queries':>7} {'kB':>6}  "
          f"p95 < {TARGET_P95_MS:.0f} ms")  # fmt: skip
    failed = missed = False
    for kind in kinds:
        if not kind.urls:
            print(f"{kind.name:16} {kind.user:6} skipped: the API is not there")
            continue
        lat = kind.latencies
        n = len(lat) + len(kind.errors)
        failed |= bool(kind.errors)
        if not lat:
            print(f"{kind.name:16} {kind.user:6} {n:8} {len(kind.errors):6}  every request "
                  f"failed: {kind.errors[0]}")  # fmt: skip
            continue
        p50, p95, p99 = (percentile(lat, q) for q in (50, 95, 99))
        met = p95 < TARGET_P95_MS
        missed |= not met
        kb = statistics.median(kind.sizes) / 1024
        print(f"{kind.name:16} {kind.user:6} {n:8} {len(kind.errors):6} {p50:8.1f} {p95:8.1f} "
              f"{p99:8.1f} {kind.alone_ms or 0:6.1f} "
              f"{kind.queries if kind.queries is not None else '-':>7} {kb:6.0f}  "
              f"{'PASS' if met else 'FAIL'}")  # fmt: skip
        if kind.errors:
            print(f"    first error: {kind.errors[0]}")
    for what, q in extra.items():
        print(f"queries, {what}: {q}")
    return 1 if failed else 3 if missed else 0


def main() -> int:
    if not ARGS.no_seed:
        seed(ARGS.comparisons, ARGS.runs)
    elif not seeded():
        sys.exit("--no-seed: this database holds no seed of perf/web_load.py")
    if ARGS.seed_only:
        return 0
    return measure(ARGS)


if __name__ == "__main__":
    sys.exit(main())
