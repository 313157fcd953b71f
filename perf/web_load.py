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

Seeding (idempotent; skipped when the database already holds this scale's seed):
the database (default rcubench_perf) is created if missing and migrated; then, in one
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
import hashlib
import itertools
import json
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
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "postgres://rcubench:rcubench@127.0.0.1:5432/rcubench_perf"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"  # 0 broker, 1 API cache, 14-15 tests
TARGET_P95_MS = 200.0
MEMBER = "perf-member"
MEMBER_PASSWORD = "perf-web-load-member"  # noqa: S105 - a throwaway account of the perf database
MARKER_TREE = "rcu"
FIXTURES = ROOT / "benchmarks" / "sync_rcu_latency" / "fixtures"
MBOX = ROOT / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"
# (name, public, share of comparisons); the restricted tree's comparisons are restricted.
TREES = (("rcu", True, 0.45), ("linux-next", True, 0.25), ("stable", True, 0.20),
         ("embargo", False, 0.10))  # fmt: skip
SYNC, EXP = "sync-rcu-latency", "sync-rcu-latency-exp"
BENCH_SETS = (((SYNC,), 0.70), ((EXP,), 0.15), ((SYNC, EXP), 0.15))
# Side B's latency factor (1.06: 6% slower) and its share of the done comparisons: the
# engine's verdicts on such data make the mix (no change, regression, improvement, small).
SHIFTS = ((1.0, 0.60), (1.06, 0.12), (0.94, 0.12), (1.015, 0.16))
# The newest ~10% are unfinished, in these states (the rest are done).
UNFINISHED = (("queued", 0.2), ("building", 0.2), ("running", 0.5), ("analysing", 0.1))


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
import numpy as np
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
from django.core.management import call_command
from django.db import connection, models, transaction
from django.db.models import Count
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchmarks.registry import get as get_benchmark
from benchmarks.spec import Better, Kind
from stats import methods, verdicts
from webapp.analysis import services as analysis_services
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, ComparisonState, Measurement, Run, Target
from webapp.states import Result
from webapp.trees.models import Build, Patch, PatchSeries, Revision, Tree, TreeMembership

# --- synthetic runs from real consoles --------------------------------------------------

WD_LINE = re.compile(r"^(\[\s*[\d.]+\] rcu-scale:\s+\d+ writer-duration:\s+\d+ )\d+\s*$")
TOTALS = re.compile(r"duration: \d+ gps: \d+ batches: \d+")


class Source:
    """One captured console (a benchmark on an arch) and the values its parser read: the
    shape every seeded run of that benchmark and arch takes, its numbers varied."""

    def __init__(self, stem: str) -> None:
        text = (FIXTURES / f"{stem}.log").read_text()
        self.expected = json.loads((FIXTURES / f"{stem}.expected.json").read_text())["metrics"]
        lines = text.split("\n")
        # The console as chunks of constant text, each followed by one writer-duration value.
        self.chunks: list[str] = []
        current: list[str] = []
        for line in lines:
            m = WD_LINE.match(line)
            if m:
                current.append(m.group(1))
                self.chunks.append("\n".join(current))
                current = [""]
            else:
                current.append(line)
        self.tail = "\n".join(current)
        assert len(self.chunks) == len(self.expected["writer_duration"]), stem
        self.head_lines = lines[: len(lines) // 2]

    def values(self, rng: np.random.Generator, factor: float) -> dict[str, list[float]]:
        """One run's metrics: the captured run's, scaled by `factor` (side and run-to-run
        variation) with 1% noise per sample; ns resolution, as the console has them."""
        base = np.asarray(self.expected["writer_duration"])
        wd = np.rint(base * factor * np.exp(rng.normal(0, 0.01, base.size)) * 1e6) / 1e6
        return {
            "writer_duration": wd.tolist(),
            "test_duration": [round(self.expected["test_duration"][0] * factor, 6)],
            "gps": list(self.expected["gps"]),
            "batches": [float(self.expected["batches"][0] + int(rng.integers(-1, 2)))],
        }

    def console(self, v: dict[str, list[float]]) -> str:
        parts: list[str] = []
        for chunk, ms in zip(self.chunks, v["writer_duration"], strict=True):
            parts += (chunk, str(round(ms * 1e6)))
        text = "".join(parts) + self.tail
        totals = (f"duration: {round(v['test_duration'][0] * 1e6)} gps: {int(v['gps'][0])} "
                  f"batches: {int(v['batches'][0])}")  # fmt: skip
        return TOTALS.sub(totals, text, count=1)

    def failed_console(self, error: str) -> str:
        head = "\n".join(self.head_lines)
        if error == Run.Error.PANIC:
            return head + "\n[    1.204311] Kernel panic - not syncing: Attempted to kill init!\n"
        return head + "\n"  # boot-failed, timeout: the console stops


SOURCES: dict[tuple[str, str], Source] = {}


def source(bench: str, arch: str) -> Source:
    key = (bench, arch)
    if key not in SOURCES:
        stem = "x86_64-pc-tcg" if arch == "x86_64" else "ppc64le-pseries-tcg"
        SOURCES[key] = Source(stem + ("-exp" if bench == EXP else ""))
    return SOURCES[key]


def check_specs() -> None:
    for bench in (SYNC, EXP):
        names = {m.name for m in get_benchmark(bench).spec.metrics}
        if names != {"writer_duration", "test_duration", "gps", "batches"}:
            sys.exit(f"{bench}'s metrics changed ({sorted(names)}): update Source.values")


# --- verdicts: the engine's rows on data of the same shape ------------------------------

TEMPLATES: dict[tuple[tuple[str, ...], float], tuple[str, list[verdicts.StatResult]]] = {}


def verdict_template(
    benches: tuple[str, ...], shift: float
) -> tuple[str, list[verdicts.StatResult]]:
    """The engine's verdict and results for B `shift` times A on these benchmarks, at 48
    runs per side (the second look): computed once, cloned onto each such comparison."""
    key = (benches, shift)
    if key in TEMPLATES:
        return TEMPLATES[key]
    rng = np.random.default_rng(len(TEMPLATES))
    n = 48
    metrics = []
    failures = []
    for bench in benches:
        spec = get_benchmark(bench).spec
        src = source(bench, "x86_64")
        runs: dict[str, list[dict[str, list[float]]]] = {
            side: [src.values(rng, (shift if side == "B" else 1.0) * np.exp(rng.normal(0, 0.01)))
                   for _ in range(n)]
            for side in "AB"
        }  # fmt: skip
        for m in spec.metrics:
            per_side = {side: [verdicts.RunSamples(2 * i + (side == "B"), tuple(r[m.name]), False)
                               for i, r in enumerate(runs[side])] for side in "AB"}  # fmt: skip
            metrics.append(verdicts.MetricInput(
                benchmark=bench, name=m.name, unit=m.unit,
                per_run_samples=m.kind is Kind.SAMPLES,
                lower_is_better=m.better is Better.LOWER, primary=m.primary,
                runs_a=per_side["A"], runs_b=per_side["B"], threshold=m.threshold,
                threshold_is_absolute=m.threshold_is_absolute,
            ))  # fmt: skip
        ok = methods.failure_counts(["ok"] * n)
        failures.append(verdicts.BenchmarkFailures(bench, ok, ok))
    analysis = verdicts.analyse(metrics, verdicts.Design(seed=len(TEMPLATES)), failures)
    TEMPLATES[key] = (analysis.verdict, analysis.results)
    return TEMPLATES[key]


# --- seeding -----------------------------------------------------------------------------


def marker(n: int, runs: int) -> str:
    return f"perf/web_load.py seed: {n} comparisons x {runs} runs"


def pick(rng: random.Random, weighted: Any) -> Any:
    values, weights = zip(*weighted, strict=True)
    return rng.choices(values, weights)[0]


def sha1(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode(), usedforsecurity=False).hexdigest()


def sha256(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


@contextlib.contextmanager
def keep_created_at(*model_classes: type[models.Model]) -> Iterator[None]:
    """bulk_create with the created_at values given (auto_now_add would stamp them all
    with the seeding's clock): the history spreads over months, as a real one does."""
    fields = []
    for model in model_classes:
        f = model._meta.get_field("created_at")
        assert isinstance(f, models.DateTimeField)
        fields.append(f)
    for f in fields:
        f.auto_now_add = False
    try:
        yield
    finally:
        for f in fields:
            f.auto_now_add = True


@dataclass
class Plan:
    """What one comparison is: decided up front, from its position in the history."""

    i: int
    tree: str
    benches: tuple[str, ...]
    arch: str
    state: str
    result: str = ""
    error: str = ""
    shift: float = 1.0
    series: bool = False
    cmdline: bool = False
    submitter: int | None = None  # index into the submitters
    done_runs: float = 1.0  # share of the schedule finished (unfinished, cancelled, failed)


def plans(n: int, rng: random.Random) -> list[Plan]:
    out = []
    unfinished_from = n - max(1, n // 10)
    for i in range(n):
        tree = pick(rng, [(name, share) for name, _, share in TREES])
        benches = pick(rng, BENCH_SETS)
        p = Plan(i, tree, benches, pick(rng, [("x86_64", 0.8), ("ppc64le", 0.2)]), "done")
        if i < 2:  # one public and one restricted done comparison of one benchmark, always
            p.tree, p.benches, p.arch = ("rcu", "embargo")[i], (SYNC,), "x86_64"
        if i >= unfinished_from:
            p.state = pick(rng, UNFINISHED)
            p.done_runs = (
                rng.uniform(0.3, 0.9) if p.state == "running" else float(p.state == "analysing")
            )
        elif i >= 2 and rng.random() < 0.05:
            p.result, p.error = pick(rng, [(("failed", "runs-failed"), 0.5),
                                           (("incomplete", "cancelled"), 0.5)])  # fmt: skip
            p.done_runs = rng.uniform(0.2, 0.8)
        else:
            p.result, p.shift = "ok", pick(rng, SHIFTS)
        p.cmdline = rng.random() < 0.1
        p.series = not p.cmdline and rng.random() < 0.6
        p.submitter = None if rng.random() < 0.3 else rng.randrange(5)
        out.append(p)
    return out


def schedule(benches: tuple[str, ...], per_side: int) -> list[tuple[str, str, int]]:
    """Run slots in run order: per index, each benchmark's pair, A B then B A (ABBA)."""
    out = []
    for i in range(per_side):
        for bench in benches:
            out += [(bench, side, i) for side in ("AB" if i % 2 == 0 else "BA")]
    return out


class Seeder:
    def __init__(self, n: int, runs: int) -> None:
        self.n, self.runs = n, runs
        self.rng = random.Random(16)  # noqa: S311 - made-up data, not secrets
        self.np = np.random.default_rng(16)
        self.now = timezone.now()
        self.spacing = timedelta(days=180) / n
        self.mbox = MBOX.read_bytes()

    def base_objects(self) -> None:
        self.targets = {
            "x86_64": Target.objects.get_or_create(
                name="qemu-x86_64", defaults={"kind": "qemu", "arch": "x86_64", "cores": 2,
                                              "threads": 2, "machine": "pc"})[0],
            "ppc64le": Target.objects.get_or_create(
                name="qemu-ppc64le", defaults={"kind": "qemu", "arch": "ppc64le", "cores": 1,
                                               "threads": 8, "machine": "pseries"})[0],
        }  # fmt: skip
        self.trees = {
            name: Tree.objects.create(name=name, public=public,
                                      url=f"https://git.kernel.org/pub/scm/{name}.git")
            for name, public, _ in TREES
        }  # fmt: skip
        self.member = User.objects.create_user(MEMBER, f"{MEMBER}@example.org", MEMBER_PASSWORD)
        self.submitters = [User.objects.create_user(f"dev{k}", f"dev{k}@example.org")
                           for k in range(5)]  # fmt: skip
        TreeMembership.objects.bulk_create(
            [TreeMembership(tree=self.trees["embargo"], user=self.member, role="submitter"),
             TreeMembership(tree=self.trees["rcu"], user=self.member, role="admin")]
            + [TreeMembership(tree=t, user=u) for t in self.trees.values() for u in self.submitters]
        )  # fmt: skip

    def seed(self) -> dict[str, int]:
        check_specs()
        counts = dict.fromkeys(("comparisons", "runs", "measurements", "verdicts"), 0)
        self.base_objects()
        all_plans = plans(self.n, self.rng)
        batch = max(1, 2000 // self.runs)  # comparisons per round trip of runs
        with keep_created_at(PatchSeries, Revision, Build, Comparison, Run, MetricVerdict):
            for start in range(0, len(all_plans), batch):
                chunk = all_plans[start : start + batch]
                comparisons = self.comparisons(chunk)
                counts["comparisons"] += len(comparisons)
                for key, value in self.runs_of(chunk, comparisons).items():
                    counts[key] += value
                if (start // batch) % 10 == 9 or start + batch >= self.n:
                    print(f"  seeded {start + len(chunk)}/{self.n} comparisons", flush=True)
        return counts

    def comparisons(self, chunk: list[Plan]) -> list[Comparison]:
        series, revisions, builds, comparisons = [], [], [], []
        for p in chunk:
            created = self.now - (self.n - p.i) * self.spacing
            tree = self.trees[p.tree]
            s = None
            if p.series:
                subject = f"[PATCH v{p.i % 3 + 1}] rcu: Tune the grace-period kthread ({p.i})"
                mbox = self.mbox.replace(b"Subject: [PATCH] rcu:", f"Subject: {subject}".encode())
                mbox += f"\nseries {p.i}\n".encode()
                s = PatchSeries(
                    message_id=f"<{p.i}-rcu@example.org>",
                    subject=subject,
                    author=f"Developer {p.submitter} <dev@example.org>",
                    submitted_at=created,
                    mbox=mbox,
                    mbox_sha256=hashlib.sha256(mbox).hexdigest(),
                    created_at=created,
                )
                series.append(s)  # fmt: skip
            base = sha1("base", p.i % 40)
            rev_a = Revision(tree=tree, ref=f"v6.12.{p.i % 40 + 80}", base_sha=base, sha=base,
                             created_at=created)  # fmt: skip
            if p.cmdline:
                rev_b = rev_a
            else:
                head = sha1("head", p.i)
                rev_b = Revision(
                    tree=tree, ref=rev_a.ref if s else f"rcu/dev.{p.i}",
                    base_sha=base if s else head, series=s, sha=head,
                    applied_with="git am" if s else "", created_at=created,
                )  # fmt: skip
            revisions += [rev_a] if rev_b is rev_a else [rev_a, rev_b]
            comparisons.append((p, rev_a, rev_b, created))
        PatchSeries.objects.bulk_create(series)
        Patch.objects.bulk_create([Patch(series=s, index=1, subject=s.subject, author=s.author,
                                         message_id=s.message_id) for s in series])  # fmt: skip
        Revision.objects.bulk_create(revisions)
        built: dict[int, tuple[Build | None, Build | None]] = {}
        for p, rev_a, rev_b, created in comparisons:
            if p.state == "queued":
                built[p.i] = (None, None)
                continue
            pair: list[Build | None] = []
            for k, rev in enumerate((rev_a, rev_b)):
                if k == 1 and rev_b is rev_a:
                    pair.append(pair[0])
                    continue
                running = p.state == "building" and k == 1
                b = Build(revision=rev, arch=p.arch, kconfig="CONFIG_RCU_SCALE_TEST=y\n",
                          config_hash=sha256("config", p.arch), sha=rev.sha,
                          toolchain="gcc (Debian 12.2.0-14+deb12u1) 12.2.0, GNU ld 2.40",
                          state="running" if running else "done", result="" if running else "ok",
                          host="build-1", created_at=created, started_at=created,
                          finished_at=None if running else created + timedelta(minutes=9),
                          artifact_key="" if running else sha256("artifact", rev.sha, p.arch),
                          seconds=None if running else 540.0 + k * 30,
                          log="" if running else "make -j2 bzImage: ok\n" * 20)  # fmt: skip
                builds.append(b)
                pair.append(b)
            built[p.i] = (pair[0], pair[1])
        Build.objects.bulk_create(builds)
        out = []
        for p, rev_a, rev_b, created in comparisons:
            per_side = self.runs // (2 * len(p.benches))
            done = p.state == "done"
            started = None if p.state == "queued" else created + timedelta(seconds=30)
            user = None if p.submitter is None else self.submitters[p.submitter]
            out.append(Comparison(
                revision_a=rev_a, revision_b=rev_b, build_a=built[p.i][0], build_b=built[p.i][1],
                cmdline_b="rcutree.jiffies_till_first_fqs=1" if p.cmdline else "",
                benchmarks=list(p.benches), target=self.targets[p.arch], min_runs=24,
                max_runs=96, seed=p.i, scheduled_per_side=0 if p.state == "queued" else per_side,
                state=p.state, result=p.result, error_code=p.error,
                verdict=verdict_template(p.benches, p.shift)[0] if p.result == "ok" else "",
                error_message={"runs-failed": "run slot failed 3 times: panic",
                               "cancelled": "cancelled by dev0"}.get(p.error, ""),
                trigger="cli" if user is None else self.rng.choice(["web", "api"]),
                requested_by=user.email if user else "root@rcubench", submitted_by=user,
                visibility="public" if self.trees[p.tree].public else "restricted",
                created_at=created, started_at=started,
                finished_at=created + timedelta(hours=2) if done else None,
            ))  # fmt: skip
        return Comparison.objects.bulk_create(out)

    def runs_of(self, chunk: list[Plan], comparisons: list[Comparison]) -> dict[str, int]:
        runs: list[Run] = []
        values: list[tuple[Run, dict[str, list[float]]]] = []
        replacements: list[tuple[Run, Run]] = []  # (replacement, failed run)
        verdicts: list[MetricVerdict] = []
        for p, c in zip(chunk, comparisons, strict=True):
            per_side = self.runs // (2 * len(p.benches))
            slots = schedule(p.benches, per_side)
            finished = round(p.done_runs * len(slots))  # runs done in schedule order
            made: dict[tuple[str, str, int], Run] = {}
            failures: list[Run] = []
            t0 = (c.started_at or c.created_at) + timedelta(minutes=10)
            for order, (bench, side, index) in enumerate(slots):
                at = t0 + timedelta(seconds=35 * order)
                run = Run(comparison=c, benchmark=bench, side=side, index=index, order=order,
                          created_at=at - timedelta(seconds=5))  # fmt: skip
                made[bench, side, index] = run
                runs.append(run)
                if p.state in ("queued", "building"):
                    continue  # queued
                if order >= finished:
                    if p.state == "running" and order == finished:
                        run.state, run.host = "running", "bench-1"
                        run.started_at = run.heartbeat_at = run.dispatched_at = at
                    elif p.state == "done":  # the rest ended with the comparison
                        run.state, run.result, run.error_code = "done", "incomplete", "cancelled"
                        run.error_message, run.finished_at = "cancelled", c.finished_at
                    continue  # else queued
                wall = 28.0 + self.rng.uniform(-3, 3)
                run.state, run.host = "done", "bench-1"
                run.started_at, run.dispatched_at = at, at - timedelta(seconds=2)
                run.finished_at = run.heartbeat_at = at + timedelta(seconds=wall)
                run.wall_seconds, run.ready_seconds = wall, 1.9 + self.rng.uniform(0, 0.2)
                run.host_busy_share = self.rng.uniform(0.0, 0.05)
                run.host_steal_share, run.host_load_avg = 0.0, self.rng.uniform(0.8, 1.6)
                run.contended, run.pinned = self.rng.random() < 0.03, True
                src = source(bench, p.arch)
                # A failing slot: the last 3 runs of a runs-failed comparison; in a good
                # one, now and then a run the side's last slot replaced.
                slot_failed = p.error == "runs-failed" and order >= finished - 3
                replaced = (p.result == "ok" and 0 < index < per_side - 1
                            and self.rng.random() < 0.004)  # fmt: skip
                if slot_failed or replaced:
                    code = (
                        self.rng.choice([Run.Error.PANIC, Run.Error.BOOT_FAILED, Run.Error.TIMEOUT])
                        if replaced
                        else Run.Error.PANIC
                    )
                    run.result, run.error_code = "failed", code
                    run.error_message = f"{code}: the console ends before the benchmark"
                    run.console_log = src.failed_console(code)
                    if replaced:
                        failures.append(run)
                    continue
                factor = (p.shift if side == "B" else 1.0) * float(np.exp(self.np.normal(0, 0.01)))
                v = src.values(self.np, factor)
                run.result, run.console_log = "ok", src.console(v)
                values.append((run, v))
            used = set()
            for failed in failures:
                last = made[failed.benchmark, failed.side, per_side - 1]
                if last.result == "ok" and id(last) not in used:
                    used.add(id(last))
                    replacements.append((last, failed))
            if p.result == "ok":
                verdicts += self.verdicts(p, c, per_side)
        Run.objects.bulk_create(runs, batch_size=500)
        for last, failed in replacements:
            last.retry_of = failed
        Run.objects.bulk_update([last for last, _ in replacements], ["retry_of"])
        units = {(b, m.name): m.unit for b in (SYNC, EXP) for m in get_benchmark(b).spec.metrics}
        measurements = [
            Measurement(run=run, benchmark=run.benchmark, metric=metric,
                        unit=units[run.benchmark, metric], samples=samples)
            for run, v in values for metric, samples in v.items()
        ]  # fmt: skip
        Measurement.objects.bulk_create(measurements, batch_size=2000)
        MetricVerdict.objects.bulk_create(verdicts, batch_size=2000)
        return {"runs": len(runs), "measurements": len(measurements), "verdicts": len(verdicts)}

    def verdicts(self, p: Plan, c: Comparison, per_side: int) -> list[MetricVerdict]:
        """The engine's rows for this comparison's benchmarks and shift, at its run count."""
        out = []
        for r in verdict_template(p.benches, p.shift)[1]:
            fields = analysis_services._fields(r)
            fields.update(n_a=per_side, n_b=per_side, look=2 if per_side >= 48 else 1)
            out.append(MetricVerdict(comparison=c, benchmark=r.benchmark, metric=r.metric,
                                     statistic=r.statistic, created_at=c.finished_at or self.now,
                                     **fields))  # fmt: skip
        return out


def seeded() -> str | None:
    """The seed's marker, if this database holds one."""
    tree = Tree.objects.filter(name=MARKER_TREE, description__startswith="perf/web_load.py")
    return tree.values_list("description", flat=True).first()


def seed(n: int, runs: int) -> None:
    found = seeded()
    if found == marker(n, runs):
        print(f"already seeded: {found}")
        return
    if found:
        print(f"the database holds another seed ({found}): flushing it")
        call_command("flush", interactive=False, verbosity=0)
    elif Comparison.objects.exists():
        sys.exit("the database holds comparisons this script did not seed: refusing to touch it")
    print(f"seeding {n} comparisons x {runs} runs ...", flush=True)
    started = time.monotonic()
    with transaction.atomic():
        counts = Seeder(n, runs).seed()
        Tree.objects.filter(name=MARKER_TREE).update(description=marker(n, runs))
    seeded_s = time.monotonic() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    took = time.monotonic() - started
    print(f"seeded in {took:.0f} s ({seeded_s:.0f} s inserting, {took - seeded_s:.0f} s "
          f"VACUUM ANALYZE): " + ", ".join(f"{v} {k}" for k, v in counts.items()))  # fmt: skip
    print(f"database size: {database_size()}")


def database_size() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        return str(cursor.fetchone()[0])


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
