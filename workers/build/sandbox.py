"""Run untrusted kernel build steps (Makefiles and Kconfig scripts come from submitters).

Commands run under bubblewrap in fresh namespaces: no network (only a private loopback),
a read-only view of /usr and /etc, a private /tmp, the source tree read-only, and only
the object directory and the ccache directory writable. When the worker runs as root the
command first drops to an unprivileged build user, so bubblewrap itself runs unprivileged.
"""

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# Host paths a build reads; everything else is absent inside the sandbox.
_READ_ONLY = ("/usr", "/etc")
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
DEFAULT_BUILD_USER = "rcubench-build"  # created by scripts/setup.sh


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces on this host."""


class StepTimeout(RuntimeError):
    """A sandboxed step ran past its time limit and was killed."""


@dataclass(frozen=True)
class Sandbox:
    readable: tuple[Path, ...]  # bound read-only (the source checkout)
    writable: tuple[Path, ...]  # bound read-write (object dir, ccache)
    user: str | None = DEFAULT_BUILD_USER  # dropped to first when running as root
    env: Mapping[str, str] = field(default_factory=dict)

    def command(self, argv: Sequence[str], cwd: Path) -> list[str]:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed: run scripts/setup.sh")
        cmd: list[str] = []
        if os.geteuid() == 0:
            if not self.user:
                raise SandboxUnavailable("running as root needs a build user to drop to")
            entry = pwd.getpwnam(self.user)
            cmd += [
                "setpriv",
                f"--reuid={entry.pw_uid}",
                f"--regid={entry.pw_gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ]
        cmd += [bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        for host in _READ_ONLY:
            cmd += ["--ro-bind", host, host]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/" + link)
            if target.is_symlink():
                cmd += ["--symlink", os.readlink(target), str(target)]
            elif target.exists():
                cmd += ["--ro-bind", str(target), str(target)]
        cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108 (private)
        for path in self.readable:
            cmd += ["--ro-bind", str(path), str(path)]
        for path in self.writable:
            cmd += ["--bind", str(path), str(path)]
        cmd += ["--chdir", str(cwd), "--clearenv"]
        env = {"PATH": _PATH, "HOME": "/tmp", "LC_ALL": "C.UTF-8", **self.env}  # noqa: S108
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--", *argv]

    def prepare(self) -> None:
        """Make the writable directories the build user's own."""
        if os.geteuid() != 0 or not self.user:
            return
        entry = pwd.getpwnam(self.user)
        for path in self.writable:
            path.mkdir(parents=True, exist_ok=True)
            if path.stat().st_uid != entry.pw_uid:
                subprocess.run(
                    ["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", "--", str(path)], check=True
                )


def run_logged(
    cmd: Sequence[str],
    *,
    log: IO[str],
    timeout: float,
    cwd: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    shown: Sequence[str] = (),
) -> int:
    """Run `cmd`, appending its output to `log`; kill its whole session after `timeout`.
    `shown` is what the log names as the command (the sandboxed argv, not the wrapper)."""
    log.write(f"$ {' '.join(shown or cmd)}\n")
    log.flush()
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    if proc.stdout is None:  # pragma: no cover - stdout=PIPE always gives one
        raise RuntimeError("no stdout pipe")
    # A watchdog rather than a select loop: reading lines blocks, the timer does not.
    timer = _Watchdog(proc, deadline)
    try:
        for line in proc.stdout:
            log.write(line)
            if on_line is not None:
                on_line(line)
        code = proc.wait()
    finally:
        timer.cancel()
        log.flush()
    if timer.fired:
        raise StepTimeout(f"killed after {timeout:.0f} s")
    return code


class _Watchdog:
    def __init__(self, proc: subprocess.Popen[str], deadline: float) -> None:
        self.fired = False
        self._proc = proc
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._kill)
        self._timer.daemon = True
        self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)

    def cancel(self) -> None:
        self._timer.cancel()
