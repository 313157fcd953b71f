"""Control-plane throughput with simulated hosts (issue 20 b): how many comparisons and runs
per hour the orchestrator, the broker and the database sustain, where the bottleneck is, and
the orchestration overhead per run.

Everything is real except the boot: PostgreSQL (a private cluster, see below), the Redis
broker (database 11), Celery workers running the project's tasks (control -c 2 and analysis
-c 2, prefork, as docker-compose starts them; beat), the orchestrator, the run service
(claim, initramfs lookup, parse, store), the statistics engine. The boot is a stand-in
(perf/_cp_standin.py) that sleeps --run-seconds (3.5 s: a TCG boot running 100
synchronize_rcu() calls) and returns a real captured sync-rcu-latency console. N simulated
hosts = one bench worker with -c N: prefork by default (N processes, as production's one
prefork -c 1 worker per host takes its next message within milliseconds; about 90 MB each,
so N=100 needs ~9 GB), or --bench-pool threads (one process, GIL shared; Celery's threads
pool has no event loop and leaves a host idle ~0.4 s before its next message, an artifact).
Builds are pre-made Build rows (done, ok, a dummy image): comparisons go straight to runs.
K comparisons (sync-rcu-latency, 24 runs per side first, A/A with 1 % boot-to-boot noise)
are created at once, as submit_comparison stores them, and run to done (or to --max-wall,
when the rest is cancelled and only what finished counts).

PostgreSQL: a private cluster (initdb in a temp dir, its own port, max_connections 400),
not the shared server: every busy simulated host holds a connection for its whole run,
as a bench worker does in production, so 100 hosts would take the shared server's
connections from everyone else. Its CPU is then ours alone to measure.

Run: .venv/bin/python perf/control_plane.py [--hosts 1,10,100] [--run-seconds 3.5]
     [--comparisons 1,8,60] [--max-wall 240] [--smoke]
The machine is 2 cores shared by the workers, PostgreSQL, Redis and the simulated hosts
(and by anyone else's work): read medians and ratios, not the third digit.
"""

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from perf._local import broker_url

BROKER = broker_url(11)  # the machine's Redis; PostgreSQL is a private cluster (Postgres)
DB_NAME = "rcubench_cp"
PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), Path("/usr/bin"))
FIXTURE = ROOT / "benchmarks/sync_rcu_latency/fixtures/x86_64-pc-tcg.log"
BENCH_QUEUE = "bench.qemu-x86_64"
QUEUES = ("control", "analysis", BENCH_QUEUE)
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the private PostgreSQL cluster -------------------------------------------------------


class Postgres:
    def __init__(self, root: Path) -> None:
        self.dir = root / "pg"
        self.port = free_port()
        self.url = f"postgres://rcubench@127.0.0.1:{self.port}/{DB_NAME}"
        self.admin = f"postgresql://rcubench@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *cmd: str) -> None:
        subprocess.run(["/usr/sbin/runuser", "-u", "postgres", "--", *cmd], check=True,
                       capture_output=True)  # fmt: skip

    def start(self) -> None:
        self.dir.mkdir()
        shutil.chown(self.dir, "postgres", "postgres")
        self._as_postgres(str(PG_BIN / "initdb"), "-D", str(self.dir), "-U", "rcubench",
                          "-A", "trust", "--no-sync")  # fmt: skip
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                "-c max_connections=400")  # fmt: skip
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.dir), "-o", opts, "-l",
                          str(self.dir / "server.log"), "-w", "start")  # fmt: skip
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DB_NAME}")

    def pid(self) -> int:
        return int((self.dir / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if (self.dir / "postmaster.pid").exists():
            self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.dir), "-m", "fast",
                              "-w", "stop")  # fmt: skip


# --- CPU accounting from /proc ------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = defaultdict(list)
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            kids[int(fields[1])].append(int(p.name))
    return kids


def _cpu(pid: int, reaped: bool) -> float:
    """utime + stime (and, for a group's root, its reaped children's) in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / TICK


def tree_cpu(root: int, kids: dict[int, list[int]]) -> float:
    total, todo = _cpu(root, True), list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        total += _cpu(pid, True)
        todo += kids.get(pid, [])
    return total


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine (every core)."""
    vals = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = vals[3] + vals[4]
    return (sum(vals[:8]) - idle) / TICK


def redis_pid() -> int | None:
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().strip() == "redis-server":
                    return int(p.name)
            except OSError:
                continue
    return None


# --- one measurement ----------------------------------------------------------------------


@dataclass
class Result:
    hosts: int
    k: int
    wall: float = 0.0
    done: int = 0
    cancelled: int = 0
    runs_ok: int = 0
    runs_other: int = 0
    looks: list[float] = field(default_factory=list)
    pre: list[float] = field(default_factory=list)  # task start -> boot start
    post: list[float] = field(default_factory=list)  # boot end -> task end
    record: list[float] = field(default_factory=list)
    advance_bench: list[float] = field(default_factory=list)
    advance_control: list[float] = field(default_factory=list)
    queue_wait: list[float] = field(default_factory=list)
    idle_gap: list[float] = field(default_factory=list)
    comparison_s: list[float] = field(default_factory=list)
    boot_s: float = 0.0
    busy_s: float = 0.0
    boots_span: tuple[float, float] = (math.inf, -math.inf)  # first boot start, last end
    cpu: dict[str, float] = field(default_factory=dict)
    peak_conns: int = 0
    max_depth: dict[str, int] = field(default_factory=dict)
    redis_ops: float = 0.0
    pg_xacts: float = 0.0
    submit_s: float = 0.0
    verdicts: dict[str, int] = field(default_factory=dict)
    t_start: float = 0.0

    def steady(self) -> float:
        """The hosts' booting share between the first boot's start and the last one's end
        (without the ramp-up and the drain: the last looks, nothing left to run)."""
        span = self.boots_span[1] - self.boots_span[0]
        return self.boot_s / (self.hosts * span) if span > 0 else math.nan


def start_worker(env: dict[str, str], root: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "perf._cp_standin", *args],
        cwd=ROOT, env={**env, "RCUBENCH_LOG_FILE": str(root / "logs" / f"{name}.log")},
        stdout=subprocess.DEVNULL, stderr=(root / "logs" / f"{name}.err").open("a"),
        start_new_session=True,
    )  # fmt: skip


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 40
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def measure(hosts: int, k: int, args: argparse.Namespace, env: dict[str, str], root: Path,
            pg: Postgres, seeded: dict[str, Any]) -> Result:  # fmt: skip
    import redis
    from django.db import connection
    from django.db.models import Q

    # Imported here: after main() has pointed Django at this script's own database.
    from webapp import dispatch
    from webapp.comparisons import orchestrator
    from webapp.comparisons.models import Comparison, ComparisonState, Run
    from webapp.states import Result as R
    from webapp.states import State

    res = Result(hosts, k)
    broker = redis.Redis.from_url(BROKER)
    broker.flushdb()
    timings, ready = root / f"timings-{hosts}", root / f"ready-{hosts}"
    wenv = {**env, "CP_TIMINGS": str(timings), "CP_READY": str(ready)}
    procs = {
        "control": start_worker(wenv, root, f"control-{hosts}", "worker", "-Q", "control",
                                "-c", "2", "-n", "control@cp"),
        "analysis": start_worker(wenv, root, f"analysis-{hosts}", "worker", "-Q", "analysis",
                                 "-c", "2", "-n", "analysis@cp"),
        "bench": start_worker(wenv, root, f"bench-{hosts}", "worker", "-Q", BENCH_QUEUE,
                              "--pool", args.bench_pool, "-c", str(hosts), "-n", "bench@cp"),
        "beat": start_worker(wenv, root, f"beat-{hosts}", "beat", "--schedule",
                             str(root / f"beat-{hosts}")),
    }  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(list(ready.glob("*@cp"))) < 3:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs.values()):
                sys.exit(f"workers did not start: see {root / 'logs'}")
            time.sleep(0.5)
        # CPU groups: each worker's process tree, the private PostgreSQL, Redis (shared with
        # others' databases), this driver, and the whole machine.
        rpid = redis_pid()
        groups = {**{n: p.pid for n, p in procs.items()}, "postgres": pg.pid(),
                  **({"redis": rpid} if rpid else {})}  # fmt: skip

        def cpu_now() -> dict[str, float]:
            kids = _children()
            out = {n: tree_cpu(pid, kids) for n, pid in groups.items()}
            out["driver"] = _cpu(os.getpid(), False)
            out["machine"] = machine_cpu()
            return out

        def pg_xacts() -> int:
            with connection.cursor() as cur:
                cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                            [DB_NAME])  # fmt: skip
                return int(cur.fetchone()[0])

        first = Comparison.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        cpu0, ops0, x0 = cpu_now(), redis_ops(broker), pg_xacts()
        t0 = time.monotonic()
        for _ in range(k):  # as submit_comparison stores one (its checks against git aside)
            from django.db import transaction

            with transaction.atomic():
                c = Comparison.objects.create(
                    revision_a=seeded["rev_a"], revision_b=seeded["rev_b"],
                    benchmarks=["sync-rcu-latency"], target=seeded["target"],
                    trigger=Comparison.Trigger.CLI, requested_by="perf/control_plane",
                    visibility=Comparison.Visibility.PUBLIC,
                )  # fmt: skip
                dispatch.send_advance(c.pk)
        res.submit_s = time.monotonic() - t0
        mine = Comparison.objects.filter(pk__gt=first)
        depth: dict[str, int] = defaultdict(int)
        while True:
            left = mine.exclude(state=ComparisonState.DONE).count()
            for q in QUEUES:
                depth[q] = max(depth[q], int(broker.llen(q)))  # type: ignore[arg-type]
            with connection.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [DB_NAME])
                res.peak_conns = max(res.peak_conns, int(cur.fetchone()[0]))
            if not left or time.monotonic() - t0 > args.max_wall:
                break
            time.sleep(1.0)
        end = time.monotonic()
        res.wall = end - t0
        cpu1, ops1, x1 = cpu_now(), redis_ops(broker), pg_xacts()
        res.cpu = {n: cpu1[n] - cpu0[n] for n in cpu1}
        res.redis_ops, res.pg_xacts = (ops1 - ops0) / res.wall, (x1 - x0) / res.wall
        res.max_depth = dict(depth)
        for pk in mine.exclude(state=ComparisonState.DONE).values_list("pk", flat=True):
            orchestrator.cancel(pk, "perf/control_plane: out of time")
            res.cancelled += 1
    finally:
        stop(list(procs.values()))
    t_start = time.time() - (time.monotonic() - t0)
    t_end = t_start + res.wall
    done = list(mine.filter(state=ComparisonState.DONE).exclude(error_code="cancelled"))
    res.done = len(done)
    for c in done:
        res.verdicts[c.verdict or c.error_code or "?"] = res.verdicts.get(
            c.verdict or c.error_code or "?", 0) + 1  # fmt: skip
        if c.finished_at:
            res.comparison_s.append((c.finished_at - c.created_at).total_seconds())
    runs = Run.objects.filter(comparison__in=mine, state=State.DONE, finished_at__isnull=False)
    in_window = runs.filter(finished_at__lte=_aware(t_end))
    res.runs_ok = in_window.filter(result=R.OK).count()
    res.runs_other = in_window.exclude(Q(result=R.OK) | Q(error_code="cancelled")).count()
    for r in runs.filter(result=R.OK, started_at__isnull=False):
        if r.dispatched_at and r.started_at:
            res.queue_wait.append((r.started_at - r.dispatched_at).total_seconds())
    _read_timings(res, timings, procs_pid={n: p.pid for n, p in procs.items()},
                  window=(t_start, t_end))  # fmt: skip
    return res


def redis_ops(broker: Any) -> int:
    return int(broker.info("stats")["total_commands_processed"])


def _aware(t: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC)


def _read_timings(res: Result, timings: Path, procs_pid: dict[str, int],
                  window: tuple[float, float]) -> None:  # fmt: skip
    """Per bench task: its boot inside it, so pre = boot start - task start and post =
    task end - boot end; host busy and idle time per thread; look and advance times."""
    files = timings.glob("*.jsonl")
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    by_thread: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_thread[row["pid"], row["thread"]].append(row)
    lo, hi = window
    for events in by_thread.values():
        events.sort(key=lambda e: (e["start"], e["kind"] != "task"))
        tasks = [e for e in events if e["kind"] == "task"]
        boots = [e for e in events if e["kind"] == "boot"]
        for kind, out in (("record", res.record), ("look", res.looks)):
            out += [e["end"] - e["start"] for e in events if e["kind"] == kind]
        bench_tasks = [t for t in tasks if t["name"].startswith("rcubench.bench.")]
        for e in events:
            if e["kind"] == "advance":
                (res.advance_bench if bench_tasks else res.advance_control).append(
                    e["end"] - e["start"])  # fmt: skip
        prev_end = None
        for t in bench_tasks:
            inside = [b for b in boots if t["start"] <= b["start"] and b["end"] <= t["end"]]
            res.busy_s += max(0.0, min(t["end"], hi) - max(t["start"], lo))
            if inside:
                b = inside[0]
                res.pre.append(b["start"] - t["start"])
                res.post.append(t["end"] - b["end"])
            if prev_end is not None:
                res.idle_gap.append(t["start"] - prev_end)
            prev_end = t["end"]
        res.boot_s += sum(max(0.0, min(b["end"], hi) - max(b["start"], lo)) for b in boots)
        if boots:
            res.boots_span = (min(res.boots_span[0], min(b["start"] for b in boots)),
                              max(res.boots_span[1], max(b["end"] for b in boots)))  # fmt: skip
    res.t_start = lo


# --- set-up ------------------------------------------------------------------------------


def seed(root: Path) -> dict[str, Any]:
    """Two revisions of the default tree with done, ok Builds of the kernel every
    comparison asks for (the cache key request_build looks up), a dummy image each."""
    from django.utils import timezone

    # Imported here: after main() has pointed Django at this script's own database.
    from benchmarks.registry import BENCHMARKS, kconfig_for
    from engine.build import kconfig
    from engine.build.arch import profile
    from webapp.comparisons.models import Target
    from webapp.states import Result as R
    from webapp.states import State
    from webapp.trees.models import Build, Revision
    from webapp.trees.services import default_tree

    tree = default_tree()
    fragments = kconfig_for(BENCHMARKS)
    config_hash = kconfig.config_hash(profile("x86_64"), kconfig.merge(profile("x86_64"),
                                                                      fragments))  # fmt: skip
    revs = {}
    for side, ref in (("a", "v6.12.117-debian"), ("b", "v6.12.117-debian-cp")):
        art = root / "artifacts" / side
        art.mkdir(parents=True)
        (art / "bzImage").write_bytes(b"\0" * 4096)
        (art / "meta.json").write_text(json.dumps({"image": "bzImage"}))
        rev = Revision.objects.create(tree=tree, ref=ref, sha=f"{side * 40}")
        now = timezone.now()
        Build.objects.create(
            revision=rev, arch="x86_64", config_hash=config_hash, sha=rev.sha,
            kconfig="".join(f"{line}\n" for line in fragments), state=State.DONE,
            result=R.OK, artifact_dir=str(art), started_at=now, finished_at=now, seconds=0.0,
        )  # fmt: skip
        revs[side] = rev
    target = Target.objects.get(name="qemu-x86_64")
    return {"rev_a": revs["a"], "rev_b": revs["b"], "target": target}


# --- report ------------------------------------------------------------------------------


def ms(xs: list[float]) -> str:
    if not xs:
        return "      -           -           -"
    return (f"{statistics.fmean(xs) * 1000:8.0f} ms {pct(xs, 0.5) * 1000:8.0f} ms "
            f"{pct(xs, 0.95) * 1000:8.0f} ms")  # fmt: skip


def report(results: list[Result], run_seconds: float, pool: str) -> None:
    print(f"\nsimulated boot {run_seconds} s (+-5 %); bench pool {pool}; per N: K comparisons "
          "of sync-rcu-latency (A/A, 24 runs per side first), created at once")  # fmt: skip
    print("2 shared cores: workers, PostgreSQL, Redis, the simulated hosts and anyone else")
    for r in results:
        ideal = r.hosts / run_seconds * 3600
        cores = {n: s / r.wall for n, s in r.cpu.items()}
        ours = sum(v for n, v in cores.items() if n not in ("machine", "redis"))
        print(f"\n=== N = {r.hosts} simulated hosts, K = {r.k} comparisons ===")
        print(f"wall {r.wall:7.1f} s   comparisons done {r.done}/{r.k}"
              f"{f' (cancelled {r.cancelled} at --max-wall)' if r.cancelled else ''}"
              f"   verdicts {r.verdicts}   submit {r.submit_s * 1000:.0f} ms")  # fmt: skip
        rate = r.runs_ok / r.wall * 3600
        print(f"runs ok {r.runs_ok} (+{r.runs_other} not ok)   runs/hour {rate:9.0f}"
              f"   comparisons/hour {r.done / r.wall * 3600:7.1f}   hosts' ideal runs/hour "
              f"{ideal:9.0f}  achieved {r.runs_ok / r.wall * 3600 / ideal:6.1%}")  # fmt: skip
        ramp = r.boots_span[0] - r.t_start
        drain = r.t_start + r.wall - r.boots_span[1]
        print(f"host utilisation: booting {r.boot_s / (r.hosts * r.wall):6.1%}   "
              f"in a bench task {r.busy_s / (r.hosts * r.wall):6.1%}   booting between the "
              f"first boot and the last {r.steady():6.1%}   (submit to first boot {ramp:.1f} s, "
              f"last boot to last verdict {drain:.1f} s)")  # fmt: skip
        print(f"comparison created -> done: p50 {pct(r.comparison_s, 0.5):7.1f} s  "
              f"max {max(r.comparison_s, default=math.nan):7.1f} s")  # fmt: skip
        cycle = [statistics.median(xs) if xs else 0.0 for xs in (r.pre, r.post, r.idle_gap)]
        over = cycle[0] + cycle[1] + cycle[2]
        print(f"host cycle per run (medians): boot {run_seconds:.2f} s + in-task overhead "
              f"{cycle[0] + cycle[1]:.3f} s + idle before its next task {cycle[2]:.3f} s "
              f"= overhead {over / (run_seconds + over):.1%} of a host's time")  # fmt: skip
        print("per run (host side)                  mean         p50         p95")
        for name, xs in (
            ("task start -> boot (claim, image)", r.pre),
            ("boot end -> task end (store+adv.)", r.post),
            ("  record_outcome (parse, store)", r.record),
            ("  advance after the run", r.advance_bench),
            ("host idle between its tasks", r.idle_gap),
            ("run queued -> started (for a host)", r.queue_wait),
            ("advance (control queue)", r.advance_control),
            ("analysis per look", r.looks),
        ):
            print(f"  {name:35} {ms(xs)}")
        print("CPU (cores over the wall): " + "  ".join(
            f"{n} {v:.2f}" for n, v in sorted(cores.items(), key=lambda kv: -kv[1])))  # fmt: skip
        per_run = {n: v * r.wall / max(r.runs_ok, 1) * 1000 for n, v in cores.items()
                   if n not in ("machine", "driver")}  # fmt: skip
        central = sum(v for n, v in per_run.items() if n != "bench")
        print("CPU per run ok: " + "  ".join(
            f"{n} {v:.1f} ms" for n, v in sorted(per_run.items(), key=lambda kv: -kv[1]))
            + f"   central (all but the hosts' bench tasks) {central:.1f} ms")  # fmt: skip
        print(f"  ours (excl. redis) {ours:.2f}   others' + redis "
              f"{cores.get('machine', 0) - ours:.2f}   of 2 cores")  # fmt: skip
        print(f"PostgreSQL peak connections {r.peak_conns}   commits/s {r.pg_xacts:.0f}   "
              f"Redis commands/s {r.redis_ops:.0f} (whole server)   max queue depth "
              + ", ".join(f"{q} {d}" for q, d in r.max_depth.items()))  # fmt: skip
        print(f"bottleneck: {bottleneck(r, cores)}")


def bottleneck(r: Result, cores: dict[str, float]) -> str:
    util = r.steady()
    procs = {n: v for n, v in cores.items() if n not in ("machine", "driver")}
    top = max(procs, key=lambda n: procs[n])
    machine = cores.get("machine", 0.0)
    conns = (f"; PostgreSQL connections peak {r.peak_conns}, above a default server's "
             "max_connections (100)" if r.peak_conns > 90 else "")  # fmt: skip
    control = {q: d for q, d in r.max_depth.items() if q != BENCH_QUEUE}
    backlog = max(control, key=lambda q: control[q])
    why = (f"hosts boot {util:.0%} of the time between the first boot and the last; machine "
           f"at {machine:.2f} of 2 cores; busiest {top} {procs[top]:.2f} cores; deepest "
           f"control-plane queue {backlog} ({control[backlog]}){conns}")  # fmt: skip
    ours = sum(v for n, v in cores.items() if n not in ("machine", "redis"))
    if util >= 0.95:
        return f"none in the control plane: the work is the boots ({why})"
    if machine >= 1.7 and ours >= 1.0:
        return f"CPU of the 2 cores, {ours:.2f} of them ours ({why})"
    if machine >= 1.7:
        return f"others' load on the 2 cores ({machine - ours:.2f} cores not ours; {why})"
    if top == "bench" and procs[top] >= 0.85:
        return f"the bench worker process (one core, GIL: {why})"
    return why


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,10,100", help="simulated host counts (N)")
    parser.add_argument("--comparisons", default="",
                        help="K per N, comma-separated (default: what fills ~--fill of "
                             "--max-wall at the hosts' ideal rate)")  # fmt: skip
    parser.add_argument("--run-seconds", type=float, default=3.5)
    parser.add_argument("--max-wall", type=float, default=200.0,
                        help="seconds per N before the rest is cancelled")  # fmt: skip
    parser.add_argument("--fill", type=float, default=0.6)
    parser.add_argument("--bench-pool", default="prefork", choices=["threads", "prefork"],
                        help="the simulated hosts as threads of one worker, or as "
                             "prefork children (production: prefork -c 1 per host)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="a 1-minute check: N=4, K=1")
    args = parser.parse_args()
    if args.smoke:
        args.hosts, args.comparisons, args.max_wall, args.run_seconds = "4", "1", 60.0, 1.0
    hosts = [int(h) for h in args.hosts.split(",")]
    fills = [max(1, round(n * args.max_wall * args.fill / (48 * args.run_seconds))) for n in hosts]
    ks = [int(k) for k in args.comparisons.split(",")] if args.comparisons else fills
    if len(ks) != len(hosts):
        sys.exit("--comparisons needs one K per --hosts entry")
    root = Path(tempfile.mkdtemp(prefix="rcubench-cp-", dir="/var/tmp"))
    root.chmod(0o755)
    (root / "logs").mkdir()
    data = root / "data"
    data.mkdir()
    (data / "guest").symlink_to(Path("/var/lib/rcubench/guest"))
    pg = Postgres(root)
    results: list[Result] = []
    try:
        pg.start()
        env = {**os.environ, "DATABASE_URL": pg.url, "CELERY_BROKER_URL": BROKER,
               "RCUBENCH_DATA_DIR": str(data), "RCUBENCH_BENCH_TARGETS": "qemu-x86_64",
               "RCUBENCH_INSTANCE": "cp-", "RCUBENCH_SERVE": "qemu-x86_64",
               "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
               "CP_RUN_SECONDS": str(args.run_seconds), "CP_FIXTURE": str(FIXTURE),
               "DJANGO_SETTINGS_MODULE": "webapp.settings"}  # fmt: skip
        os.environ.update(env)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
        import django

        django.setup()
        # Imported here: after main() has pointed Django at this script's own database.
        from engine.vm.images import build_initramfs, busybox_for

        build_initramfs("x86_64", data / "images", busybox_for("x86_64", data))  # once, cached
        seeded = seed(root)
        for n, k in zip(hosts, ks, strict=True):
            print(f"N = {n}, K = {k} ...", flush=True)
            results.append(measure(n, k, args, env, root, pg, seeded))
    finally:
        from django.db import connections

        connections.close_all()
        try:
            import redis

            redis.Redis.from_url(BROKER).flushdb()
        finally:
            pg.stop()
            shutil.rmtree(root, ignore_errors=True)
    report(results, args.run_seconds, args.bench_pool)


if __name__ == "__main__":
    main()
