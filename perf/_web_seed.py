"""The seeding of perf/web_load.py's database (idempotent: skipped when the database already
holds this scale's seed, marked in the description of the "rcu" tree).

In one transaction: 4 trees (one restricted: its comparisons are visible to members only),
a member and 5 submitters, N comparisons (1,000 by default) of R runs each (100: both sides,
ABBA order; a mix of states, verdicts, targets, benchmarks, patch series, command-line
comparisons), their builds, runs with a console (perf/_web_synthetic.py), every metric of
every ok run as the run service stores it, failed and replaced runs, and for done
comparisons the MetricVerdict rows the statistics engine stores. The history spreads over
180 days, each comparison's kind decided up front from its position in it (Plan). Then
VACUUM ANALYZE; seed() prints how long seeding took and the database's size. A database
that holds another seed is flushed; one that holds comparisons this script did not seed is
refused.

Imported by perf/web_load.py once Django is set up.
"""

import contextlib
import hashlib
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, models, transaction
from django.utils import timezone

from benchmarks.registry import get as get_benchmark
from perf._web_synthetic import EXP, SYNC, check_specs, source, verdict_template
from webapp.analysis import services as analysis_services
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, Measurement, Run, Target
from webapp.trees.models import Build, Patch, PatchSeries, Revision, Tree, TreeMembership

ROOT = Path(__file__).resolve().parents[1]
MEMBER = "perf-member"
MEMBER_PASSWORD = "perf-web-load-member"  # noqa: S105 - a throwaway account of the perf database
MARKER_TREE = "rcu"
MBOX = ROOT / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"
# (name, public, share of comparisons); the restricted tree's comparisons are restricted.
TREES = (("rcu", True, 0.45), ("linux-next", True, 0.25), ("stable", True, 0.20),
         ("embargo", False, 0.10))  # fmt: skip
BENCH_SETS = (((SYNC,), 0.70), ((EXP,), 0.15), ((SYNC, EXP), 0.15))
# Side B's latency factor (1.06: 6% slower) and its share of the done comparisons: the
# engine's verdicts on such data make the mix (no change, regression, improvement, small).
SHIFTS = ((1.0, 0.60), (1.06, 0.12), (0.94, 0.12), (1.015, 0.16))
# The newest ~10% are unfinished, in these states (the rest are done).
UNFINISHED = (("queued", 0.2), ("building", 0.2), ("running", 0.5), ("analysing", 0.1))


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
