"""Mail commands: from receipt to job queued (issue 35: <= 5 s at the 95th percentile).

A real captured reply (webapp/alerts/tests/fixtures/inbound/rerun.eml, mutt) answering a
regression of the demo's comparison, with a fresh Message-ID each time, is handed to the
real LMTP listener (webapp/alerts/listener.py) by smtplib.LMTP, as an MTA would; a real
Celery worker on the control queue reads it (inbound.process) and submits the rerun through
the one way in (submission: the default tree's base resolved, the demo's patch checked to
apply). Measured per mail: from the LMTP DATA's 250 to the rerun's Comparison row, and
from the 250 to the answer's Alert row, polled every 10 ms. Builds and runs are not: no
worker consumes the build and bench queues (a heartbeat row stands in for the bench
worker, which submission asks for; the messages go with the perf's Redis database).

Run: .venv/bin/python perf/mail_commands.py [--mails 40]
It uses its own Redis database (13) and PostgreSQL database (rcubench_mailcmd, made afresh
and dropped at the end), and one Celery worker (solo pool) it starts and stops. Run it on
an otherwise idle machine.
"""

import argparse
import os
import re
import smtplib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from perf._local import start_celery_worker, use_own_services

DB_NAME = "rcubench_mailcmd"
use_own_services(DB_NAME, 13)
os.environ["RCUBENCH_ALLOW_FEW_RUNS"] = "1"  # rerun.eml asks for 12 a side
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django

from perf._db import reset_database

reset_database(DB_NAME, create=True)
django.setup()

from django.contrib.auth.models import User
from django.core.management import call_command

from webapp.alerts import listener
from webapp.alerts.models import Alert
from webapp.comparisons.models import Comparison, Target
from webapp.comparisons.serving import record_served
from webapp.comparisons.submission import ComparisonRequest, submit_comparison
from webapp.regressions import services as regressions
from webapp.trees.models import TreeMembership
from webapp.trees.services import DEFAULT_TREE, default_tree

RERUN = ROOT / "webapp/alerts/tests/fixtures/inbound/rerun.eml"
DEMO = ROOT / "demo/0001-rcu-fqs-one-more-jiffy-demo.mbox"
ANSWERED = "<rcubench.c17.5d41402abc4b2a76@bench.example.org>"  # what the fixture answers
BASE = "v6.12.117-debian"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _worker(log: Path) -> subprocess.Popen[bytes]:
    return start_celery_worker(["-Q", "control", "--pool", "solo", "--without-gossip",
                                "--without-mingle", "--hostname", "perf-mail@%h",
                                "--loglevel", "INFO"], log)  # fmt: skip


def _seed() -> None:
    """The regression the fixture answers: the demo's comparison, ended as a regression
    (no runs: the rerun needs its parameters only), its alert with the fixture's id, and
    Jane, a submitter of the default tree, the fixture's sender."""
    tree = default_tree()
    _serve()
    c = submit_comparison(ComparisonRequest(
        tree=tree.name, base_ref=BASE, series_mbox=DEMO.read_bytes(),
        benchmarks=("sync-rcu-latency",), target="qemu-x86_64", min_runs=5, max_runs=5,
    ))  # fmt: skip
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok", verdict="regression")
    regressions.open_for_comparison(c.pk)
    jane = User.objects.create(username="jane", email="jane.dev@dev.example.org")
    Alert.objects.create(
        comparison=c,
        kind="regression",
        recipient=jane.email,
        subject="Re: [PATCH] rcu: demo",
        message_id=ANSWERED,
        state="sent",
    )
    TreeMembership.objects.create(tree=tree, user=jane, role="submitter")


def _serve() -> None:
    """A bench worker's heartbeat for the target (submission refuses unserved targets);
    no bench or build worker runs: the comparisons are queued, never built or booted."""
    record_served("perf-mail-standin", [Target.objects.get(name="qemu-x86_64").queue])


def _wait(query: object, timeout: float = 60.0) -> float:
    start = time.monotonic()
    while not query.exists():  # type: ignore[attr-defined]
        if time.monotonic() - start > timeout:
            sys.exit("timed out: see the worker's log")
        time.sleep(0.01)
    return time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mails", type=int, default=40)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    assert default_tree().name == DEFAULT_TREE
    _seed()
    raw = RERUN.read_bytes()
    port = _free_port()
    lmtp = listener.start_lmtp("127.0.0.1", port)
    tmp = Path(tempfile.mkdtemp(prefix="perf-mail-"))
    worker = _worker(tmp / "worker.log")
    queued, answered = [], []
    try:
        for i in range(args.mails):
            _serve()
            mid = f"<perf.{i}.{time.time_ns()}@dev.example.org>"
            mail = re.sub(rb"(?mi)^Message-ID: .*$", f"Message-ID: {mid}".encode(), raw, count=1)
            with smtplib.LMTP("127.0.0.1", port) as client:
                client.sendmail("jane.dev@dev.example.org", ["bench@localhost"], mail)
            took = time.monotonic()  # the MTA has its 250: the mail is rcubench's now
            rerun = Comparison.objects.filter(trigger="mail", requested_by__contains=mid)
            queued.append(_wait(rerun) - took)
            answered.append(
                _wait(Alert.objects.filter(kind="reply", inbound__message_id=mid)) - took
            )
    finally:
        worker.terminate()
        worker.wait(30)
        lmtp.stop()
    for name, xs in (("receipt -> rerun queued", queued), ("receipt -> answer queued", answered)):
        xs = sorted(xs)
        p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
        print(f"{name}: n={len(xs)} median {statistics.median(xs):.3f} s, "
              f"p95 {p95:.3f} s, max {xs[-1]:.3f} s")  # fmt: skip
    reset_database(DB_NAME, create=False)


if __name__ == "__main__":
    main()
