"""Run untrusted kernel build steps (Makefiles and Kconfig scripts come from submitters).

Commands run under bubblewrap in fresh namespaces: no network (only a private loopback),
a read-only view of /usr and of the few files under /etc that compilers and shells need
(never the whole of /etc: a deployment's environment file lives there), a private /tmp,
the source tree read-only, and only the directories the step must write. When the worker
runs as root the command first drops to an unprivileged build user, so bubblewrap itself
runs unprivileged; a non-root worker is already unprivileged and sees the same minimal view.

Resource limits: per-process limits (address space, file size, processes, no core dumps)
through prlimit always; when the worker is root and cgroup v1 is writable, the whole step
also runs in its own memory and pids cgroups, killed as a whole when it ends.
"""

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# Host paths a build reads; everything else is absent inside the sandbox. Under /etc only
# what the dynamic linker, the tool alternatives (awk, cc, ...) and user lookups need.
_READ_ONLY = ("/usr",)
_ETC = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group",
    "nsswitch.conf", "localtime",
)  # fmt: skip
_CGROUP_ROOT = Path("/sys/fs/cgroup")
GiB = 2**30
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
DEFAULT_BUILD_USER = "rcubench-build"  # created by scripts/setup.sh


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces on this host."""


class StepTimeout(RuntimeError):
    """A sandboxed step ran past its time limit and was killed."""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed step may use. Memory is for the whole step (a cgroup) where the
    host allows it, and bounds every process's address space in any case."""

    memory_bytes: int = 8 * GiB
    max_processes: int = 4096
    max_file_bytes: int = 4 * GiB  # one file written (vmlinux with debug info stays below)
    max_log_bytes: int = 64 * 2**20  # the step's output kept in the log
    max_line_chars: int = 4096  # a longer output line is cut, with a marker

    def prlimit(self) -> list[str]:
        return [
            "prlimit",
            f"--as={self.memory_bytes}",
            f"--fsize={self.max_file_bytes}",
            f"--nproc={self.max_processes}",
            "--core=0",
            "--",
        ]


@dataclass(frozen=True)
class Sandbox:
    readable: tuple[Path, ...]  # bound read-only (the source checkout)
    writable: tuple[Path, ...]  # bound read-write (object dir, ccache)
    user: str | None = DEFAULT_BUILD_USER  # dropped to first when running as root
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    cgroups: tuple[Path, ...] = ()  # cgroup.procs files the step joins (see `cgroup`)
    # Writable directories seen at another path inside: an untrusted build's copy of the
    # object dir appears where the original is, so kbuild's recorded command lines match.
    seen_as: Mapping[Path, Path] = field(default_factory=dict)

    def command(self, argv: Sequence[str], cwd: Path) -> list[str]:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed: run scripts/setup.sh")
        cmd: list[str] = []
        if self.cgroups:  # join before dropping privileges: only root may move itself
            join = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.cgroups)))
            shift = len(self.cgroups)
            cmd += ["/bin/sh", "-c", f'{join} && shift {shift} && exec "$@"', "sh",
                    *map(str, self.cgroups)]  # fmt: skip
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
        cmd += self.limits.prlimit()
        cmd += [bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        for host in _READ_ONLY:
            cmd += ["--ro-bind", host, host]
        for name in _ETC:
            cmd += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
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
            cmd += ["--bind", str(path), str(self.seen_as.get(path, path))]
        cmd += ["--chdir", str(cwd), "--clearenv"]
        env = {"PATH": _PATH, "HOME": "/tmp", "LC_ALL": "C.UTF-8", **self.env}  # noqa: S108
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--", *argv]

    def run(
        self, argv: Sequence[str], cwd: Path, *, stdin: str, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run one short step with `stdin` as its input; its output is returned, cut to the
        log limit. Raises StepTimeout when it runs past `timeout` seconds."""
        proc = _start(self.command(argv, cwd), stdin=subprocess.PIPE)
        timer = _Watchdog(proc, time.monotonic() + timeout)
        try:
            out, _ = proc.communicate(stdin)
        finally:
            timer.cancel()
        if timer.fired:
            raise StepTimeout(f"{Path(argv[0]).name} killed after {timeout:.0f} s")
        limit = self.limits.max_log_bytes
        return subprocess.CompletedProcess(list(argv), proc.returncode, out[:limit], "")

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
    limits: Limits | None = None,
) -> int:
    """Run `cmd`, appending its output to `log`; kill its whole session after `timeout`.
    `shown` is what the log names as the command (the sandboxed argv, not the wrapper).

    The output is untrusted: a line longer than the limit is cut (the rest is read and
    dropped, never held in memory), and past the log limit nothing more is written, though
    the output is still drained so the step does not block on a full pipe."""
    cap = limits or Limits()
    log.write(f"$ {' '.join(shown or cmd)}\n")
    log.flush()
    deadline = time.monotonic() + timeout
    proc = _start(cmd, cwd=cwd, stdin=subprocess.DEVNULL)
    if proc.stdout is None:  # pragma: no cover - stdout=PIPE always gives one
        raise RuntimeError("no stdout pipe")
    # A watchdog rather than a select loop: reading lines blocks, the timer does not.
    timer = _Watchdog(proc, deadline)
    written, dropped = 0, 0
    try:
        for line in _lines(proc.stdout, cap.max_line_chars):
            if written + len(line) > cap.max_log_bytes:
                dropped += len(line)
            else:
                log.write(line)
                written += len(line)
            if on_line is not None:
                on_line(line)
        code = proc.wait()
        if dropped:
            log.write(f"[rcubench: {dropped} more characters of output not kept: the log "
                      f"limit is {cap.max_log_bytes} bytes]\n")  # fmt: skip
    finally:
        timer.cancel()
        log.flush()
    if timer.fired:
        raise StepTimeout(f"killed after {timeout:.0f} s")
    return code


def _start(cmd: Sequence[str], *, stdin: int, cwd: Path | None = None) -> subprocess.Popen[str]:
    """A step in its own session (killed as a whole), its output merged and decoded."""
    return subprocess.Popen(cmd, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)  # fmt: skip


def _lines(stream: IO[str], max_chars: int) -> Iterator[str]:
    """The stream's lines, each cut to `max_chars` with a marker saying how much was cut."""
    while line := stream.readline(max_chars):
        if line.endswith("\n") or len(line) < max_chars:
            yield line
            continue
        cut = 0
        while (rest := stream.readline(max_chars)) and not rest.endswith("\n"):
            cut += len(rest)
        cut += len(rest.rstrip("\n"))
        yield f"{line}[rcubench: line cut, {cut} more characters]\n"


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


@contextlib.contextmanager
def cgroup(label: str, limits: Limits) -> Iterator[tuple[Path, ...]]:
    """Memory and pids cgroups (v1) for one build: yields their cgroup.procs files for
    `Sandbox.cgroups`, and on exit kills whatever is left in them and removes them. Yields
    () where the host does not let us make them (not root, no writable cgroup v1): the
    per-process limits still apply then."""
    if os.geteuid() != 0:
        yield ()
        return
    name = f"rcubench-{label}-{os.getpid()}-{secrets.token_hex(3)}"
    made: list[Path] = []
    for controller, knob, value in (
        ("memory", "memory.limit_in_bytes", limits.memory_bytes),
        ("pids", "pids.max", limits.max_processes),
    ):
        path = _CGROUP_ROOT / controller / name
        try:
            path.mkdir()
        except OSError:
            continue
        made.append(path)
        with contextlib.suppress(OSError):
            (path / knob).write_text(f"{value}\n")
    try:
        yield tuple(path / "cgroup.procs" for path in made)
    finally:
        for path in made:
            _empty_and_remove(path)


def oom_killed(procs: Sequence[Path]) -> bool:
    """Whether the memory cgroup among `procs`' killed a process for its limit."""
    for path in procs:
        control = path.parent / "memory.oom_control"
        with contextlib.suppress(OSError):
            for line in control.read_text().splitlines():
                if line.startswith("oom_kill ") and int(line.split()[1]) > 0:
                    return True
    return False


def _empty_and_remove(path: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        path.rmdir()
