"""What a person and a script read from the command line, from the real `manage.py` in a
process of its own: the verdict table fits the terminal's width (COLUMNS; 80 off a
terminal) with warnings under their row, `--format json` is the summary with its keys,
`compare --server` needs none of the server's settings, and no library's start-up line
comes before a command's own output.

The comparison is a realistic finished one: both sync-rcu-latency benchmarks, 24 runs a
side in ABBA order, each run's samples drawn from what the real parser read from a real
captured console (benchmarks/sync_rcu_latency/fixtures), side B's grace periods 6% longer,
one panicked run on B, and the verdicts of the real statistics engine."""

import json
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from benchmarks.registry import get as get_benchmark
from benchmarks.spec import Kind, RunContext
from conftest import _database_url
from engine.run import signatures
from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
)
from webapp.analysis.services import analyse_comparison
from webapp.comparisons.models import Comparison, Measurement, Run
from webapp.comparisons.summary import Header, KernelFacts

ROOT = Path(__file__).resolve().parents[3]
CONSOLES = ROOT / "benchmarks" / "sync_rcu_latency" / "fixtures"
BENCHES = {"sync-rcu-latency": "x86_64-pc-tcg.log", "sync-rcu-latency-exp": "x86_64-pc-tcg-exp.log"}
RUNS = 24
SLOWER = 1.06  # side B's grace periods

pytestmark = pytest.mark.django_db(transaction=True)


def _captured(bench: str) -> dict[str, tuple[float, ...]]:
    console = (CONSOLES / BENCHES[bench]).read_text(errors="replace")
    return get_benchmark(bench).measure(console, RunContext(wall_seconds=90.0, ready_seconds=5.0))


@pytest.fixture
def finished() -> Comparison:
    base = RevisionFactory.create(tree__name="linux-6.12", ref="v6.12.117-debian")
    c = ComparisonFactory.create(
        revision_a=base, revision_b=RevisionFactory.create(tree=base.tree, ref="rcu/dev"),
        target=TargetFactory.create(), benchmarks=list(BENCHES), seed=7,
        state="done", result="ok",
    )  # fmt: skip
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok")
    c.save()
    rng = np.random.default_rng(7)
    order = 0
    for bench in BENCHES:
        spec, captured = get_benchmark(bench).spec, _captured(bench)
        for i in range(RUNS):
            for side in "AB" if i % 2 == 0 else "BA":
                run = RunFactory.create(comparison=c, benchmark=bench, side=side, index=i,
                                        order=order, state="done", result="ok")  # fmt: skip
                order += 1
                factor = (SLOWER if side == "B" else 1.0) * rng.lognormal(0, 0.01)
                for m in spec.metrics:
                    values = np.asarray(captured[m.name])
                    if m.kind is Kind.SAMPLES:  # a run's samples: the captured run resampled
                        values = rng.choice(values, values.size) * factor
                    elif m.name == "test_duration":
                        values = values * factor
                    elif m.name == "batches":  # grace periods per batch vary by one
                        values = values + rng.integers(-1, 2)
                    Measurement.objects.create(
                        run=run, benchmark=bench, metric=m.name, unit=m.unit,
                        samples=values.round(6).tolist(),
                    )  # fmt: skip
    RunFactory.create(
        comparison=c, benchmark="sync-rcu-latency", side="B", index=RUNS, order=order,
        state="done", result="failed", error_code="panic",
        error_message="Kernel panic - not syncing: Attempted to kill init!",
    )  # fmt: skip
    analysis = analyse_comparison(c.pk)
    Comparison.objects.filter(pk=c.pk).update(verdict=analysis.verdict)
    c.refresh_from_db()
    return c


def _manage(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT,
            **extra: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The real manage.py against the test database, output to pipes (not a terminal)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        env["DATABASE_URL"] = _database_url(connection.settings_dict)
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=cwd,
                          env={**env, **extra}, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


@pytest.mark.parametrize("columns", [None, "80", "120"])
def test_the_verdict_table_fits_the_terminal(finished, columns, tmp_path):
    extra = {"COLUMNS": columns} if columns else {}
    done = _manage("compare", "--follow", str(finished.pk), **extra)
    assert done.returncode == 0, done.stderr
    width = int(columns or 80)  # off a terminal, without COLUMNS: 80
    lines = done.stdout.splitlines()
    (tmp_path / f"cli-{width}.txt").write_text(done.stdout)  # kept by pytest, for a look
    assert lines[0].startswith("done: ")  # the progress line, then the table
    assert max(len(line) for line in lines) <= width, done.stdout
    assert lines[-1] == (f"verdict: {finished.verdict}   "
                         f"report: http://127.0.0.1:8000/comparisons/{finished.pk}/")  # fmt: skip
    # Every verdict row is there; its warnings and cross-checks are under it, indented.
    rows = [ln for ln in lines if ln.startswith("sync-rcu-latency") and " guards: " not in ln]
    assert len(rows) == finished.verdicts.exclude(statistic="boschloo").count()
    # Under the rows, what the change cost: each rcuscale benchmark's guards, from the
    # engine's rows of its calls, grace periods and calls per grace period.
    guards = [ln for ln in lines if " guards: " in ln]
    assert [g.split()[0] for g in guards] == ["sync-rcu-latency", "sync-rcu-latency-exp"]
    assert guards[0].startswith("sync-rcu-latency guards: calls +0.00% [+0.00, +0.00];")
    assert rows[0].startswith("sync-rcu-latency/writer_duration * p50 ")  # primary first
    assert rows[0].endswith("  regression")
    after = lines[lines.index(rows[0]) + 1 :]
    assert re.match(r"  \d+\.\d+ ms  +\d+\.\d+ ms  +\+\d", after[0])  # its numbers under it
    assert after[1].startswith("    cross-checks: 24/24 B runs above A's median")
    assert any(ln.startswith("    warning: inconclusive at 24+24 runs") for ln in lines)


def test_a_diagnosis_follows_the_verdict_line_with_its_link(finished):
    Comparison.objects.filter(pk=finished.pk).update(diagnosis_per_side=8)
    done = _manage("compare", "--follow", str(finished.pk), COLUMNS="80")
    assert done.returncode == 0, done.stderr
    tail = " ".join(" ".join(done.stdout.splitlines()[-3:]).split())  # unwrapped
    assert tail.endswith(f"why: 8 traced runs a side of both kernels follow (docs/tracing.md); "
                         f"their grace-period phases: "
                         f"http://127.0.0.1:8000/comparisons/{finished.pk}/#diagnosis")  # fmt: skip


def test_a_console_finding_follows_the_verdict_line(finished):
    # B's sync-rcu-latency runs print the planted WARN_ON_ONCE's real report; A's nothing.
    warn = (ROOT / "engine" / "run" / "tests" / "fixtures" / "x86_64-warn-once.log").read_text()
    runs = Run.objects.filter(comparison=finished, benchmark="sync-rcu-latency", result="ok")
    runs.filter(side="B").update(console_signatures=signatures.scan(warn).as_json())
    runs.filter(side="A").update(console_signatures=signatures.scan("").as_json())
    done = _manage("compare", "--follow", str(finished.pk), COLUMNS="80")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout
    last = next(i for i, line in enumerate(lines) if line.startswith("verdict: "))
    tail = " ".join(" ".join(lines[last:]).split())  # unwrapped
    assert tail.startswith(f"verdict: {finished.verdict} report: ")
    assert tail.endswith("console: sync-rcu-latency: WARNING at kernel/rcu/tree.c "
                         f"synchronize_rcu: in {RUNS} of {RUNS} B runs, none of {RUNS} A runs "
                         "[finding]")  # fmt: skip


def test_json_is_the_summary_with_its_keys(finished):
    done = _manage("compare", "--follow", str(finished.pk), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # stdout is the JSON alone (progress: stderr)
    assert done.stderr.startswith("done: ")
    assert set(summary) == {"comparison", "report_url", "verdicts", "guards", "reliability",
                            "console_differences", "reproducer"}  # fmt: skip
    assert set(summary["comparison"]) == {f.name for f in fields(Header)}
    assert set(summary["comparison"]["kernels"][0]) == {f.name for f in fields(KernelFacts)}
    assert summary["comparison"]["verdict"] == finished.verdict
    assert summary["report_url"] == f"http://127.0.0.1:8000/comparisons/{finished.pk}/"
    assert {v["benchmark"] for v in summary["verdicts"]} == set(BENCHES)
    assert all({"metric", "statistic", "shift_pct", "p_adjusted", "verdict", "warnings"}
               <= set(v) for v in summary["verdicts"])  # fmt: skip
    # The command is the last line; a preset (sync-rcu-latency-exp) has its note above it.
    *notes, command = summary["reproducer"].split("\n")
    assert command.startswith("./manage.py compare --tree linux-6.12 ")
    assert all(note.startswith("# ") for note in notes)


def test_compare_server_needs_no_server_settings(tmp_path, closed_port):
    """A developer's machine: no .env (the file named does not exist), an empty
    environment, another directory; the server is not up."""
    empty = {"RCUBENCH_ENV_FILE": str(tmp_path / ".env")}
    done = _manage("compare", "--server", f"http://127.0.0.1:{closed_port}", "--token", "t",
                   "--base", "v6.12", "--no-wait", env=empty, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert "DJANGO_SECRET_KEY" not in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"CommandError: cannot reach http://127.0.0.1:{closed_port}/api/v1/: Connection refused"
    )
    # The server's commands still refuse to start without the secret, and the client's
    # empty key signs nothing.
    check = _manage("check", env=empty, cwd=tmp_path)
    assert check.returncode == 1
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in check.stderr
    sign = "from django.core import signing; signing.dumps('forged')"
    signed = _manage("shell", "-c", sign, env={**empty, "RCUBENCH_REMOTE_CLIENT": "1"},
                     cwd=tmp_path)  # fmt: skip
    assert signed.returncode == 1
    assert "The SECRET_KEY setting must not be empty" in signed.stderr


def test_no_library_start_up_line_on_stderr():
    done = _manage("check")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    debug = _manage("check", LOG_LEVEL="DEBUG")  # where an operator asks for everything
    assert "AXES: BEGIN" in debug.stderr
