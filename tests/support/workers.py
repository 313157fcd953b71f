"""Real `celery worker` and `celery beat` processes for the tests that need the worker as it
runs in production: its own process, the real Redis broker, the test database. The
`celery_processes` fixture of the root conftest.py makes one and stops what it started."""

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcesses:
    """Real `celery worker` (solo pool) and `celery beat` processes on the test broker,
    writing to the test database; started, killed and restarted by a test."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: list[subprocess.Popen] = []

    def start_worker(self, pool: str = "solo", **extra_env: str) -> subprocess.Popen:
        """A worker as the tests need it (solo pool); pool="prefork" starts it as
        scripts/service.sh does (prefork, no --loglevel: LOG_LEVEL applies)."""
        log = self.log_dir / f"worker-{len(self.procs)}.log"
        cmd = [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
            "--pool", pool, "--concurrency", "1", "--without-gossip", "--without-mingle",
            "--hostname", f"test-{uuid.uuid4().hex[:8]}@%h",
            *(["--loglevel", "INFO"] if pool == "solo" else []),
        ]  # fmt: skip
        proc = self._spawn(cmd, log, extra_env)
        # Its log lines go to RCUBENCH_LOG_FILE when that is set, else to its output.
        ready_in = Path(extra_env.get("RCUBENCH_LOG_FILE") or log)
        deadline = time.monotonic() + 60
        while not ready_in.exists() or "ready." not in ready_in.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"celery worker did not start:\n{log.read_text()}")
            time.sleep(0.2)
        return proc

    def start_beat(self, **extra_env: str) -> subprocess.Popen:
        log = self.log_dir / f"beat-{len(self.procs)}.log"
        schedule = self.log_dir / f"beat-{len(self.procs)}.schedule"
        cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat",
               "--loglevel", "INFO", "--schedule", str(schedule)]  # fmt: skip
        return self._spawn(cmd, log, extra_env)

    def _spawn(self, cmd: list[str], log: Path, extra_env: dict[str, str]) -> subprocess.Popen:
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env={**self.env, **extra_env}, stdout=out,
                                    stderr=subprocess.STDOUT)  # fmt: skip
        proc.log_path = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def wait_for(self, what: Callable[[], Any], timeout: float, step: float = 0.25) -> Any:
        """What `what()` returns once it is truthy, asked every `step` seconds; the test
        fails with the workers' logs after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if got := what():
                return got
            time.sleep(step)
        pytest.fail(f"timed out after {timeout:.0f} s\n{self.logs()}")

    def until_done(self, comparison: Any, timeout: float = 300) -> Any:
        """`comparison` (a Comparison), refreshed, once its state is done."""

        def ended() -> bool:
            comparison.refresh_from_db()
            return bool(comparison.state == "done")

        self.wait_for(ended, timeout)
        return comparison

    def logs(self) -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.log_path.read_text()[-6000:]}"  # type: ignore[attr-defined]
                         for p in self.procs)  # fmt: skip

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
