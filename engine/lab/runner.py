"""One run on a bare-metal lab host, and bringing the host back to its known-good kernel.

A run: ssh to the host (its key pinned), read its boot id, stage the kernel and initramfs
on a tmpfs (`STAGE_DIR`, emptied first), `kexec -l` them and delete them at once (the image
is in the kernel's memory now), start the host's console command (serial-over-LAN, a
console server, or the stand-in's TCP serial) and drop what it printed before this boot,
check that the staging directory is empty, `kexec -e`, and watch the console exactly as
the VM runner watches a VM's: the same scan, caps and outcomes (engine/run/console.py),
so nothing downstream can tell a lab run from a VM run. Nothing of another comparison is
on the host, or in the run's console, while the kernel under test runs. That kernel ends
its run by restarting (the guest init's rcubench.end=reboot), by powering off (in-kernel
benchmarks), or not at all (a hang); or it lies: it can print `reboot: Restarting system`
and keep running.

Afterwards `restore` brings back the known-good kernel. On a pool that takes untrusted
kernels (`LabHost.trusted_only` false) every run ends with the pool's reprovision command
and a power cycle, whatever the console said. On a trusted-only pool a restarted or
panicked host is waited for, a powered-off or hung one power-cycled at once. Either way the
host is back only when sshd answers with the pinned key, its boot id differs from the one
read before kexec, and it runs its known-good kernel release; else it is power-cycled
again and reported `recovering`, and after `tries` power cycles reported lost, for the
caller to disable.

Commands are the operator's (trusted) templates: one command per line, split like a shell
would (no shell runs them), with {name}, {address} and {port} filled in per argument. A
filled-in value never starts with `-` (so it is never an option) and templates end the
options with `--` before a host argument where the tool allows it (docs/lab.md).
"""

import contextlib
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import paramiko

from engine.lab.ssh import Endpoint, SSHError, answers, check, connect, put, run
from engine.run.console import CONSOLE_MAX_BYTES, POLL, BootWatch, ConsoleFile, RunOutcome
from engine.run.outcomes import BOOT_FAILED, INFRA, OK, PANIC

# Root's own directory on a tmpfs of the host: gone at the next boot, emptied before each
# run, and its files deleted as soon as kexec holds the image.
STAGE_DIR = PurePosixPath("/run/rcubench-lab")
# Where runners before issue 30 kept the last six kernels on the host's disk: removed.
LEGACY_DIR = PurePosixPath("/var/lib/rcubench-lab")
BOOT_ID = PurePosixPath("/proc/sys/kernel/random/boot_id")
REPROVISION_TIMEOUT = 1800.0  # one run of a pool's reprovision command, all its lines
_SSH_TIMEOUT = 30.0
_CONSOLE_SETTLE = 0.5  # seconds without console output before kexec -e
_CONSOLE_DRAIN_MAX = 5.0  # a console still printing after this is cut there
_COMMAND_TIMEOUT = 120.0  # one power or console command
_BOOT_ID = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")

# sh -c scripts, their paths as arguments. Prepare: the legacy directory goes, the staging
# directory must be a tmpfs (root's, 0700) and is emptied. Clear: empty it and prove it.
_PREPARE = (
    'set -e; rm -rf -- "$2"; mkdir -p -- "$1"; chmod 0700 -- "$1"; '
    'fs=$(stat -f -c %T -- "$1"); '
    '[ "$fs" = tmpfs ] || { echo "$1 is on $fs, not on a tmpfs" >&2; exit 1; }; '
    'find "$1" -mindepth 1 -delete'
)
_CLEAR = (
    'find "$1" -mindepth 1 -delete; left=$(find "$1" -mindepth 1 | head -n 3); '
    '[ -z "$left" ] || { echo "still in $1: $left" >&2; exit 1; }'
)


@dataclass(frozen=True)
class LabHost:
    """A lab host as the runner needs it (the operator's settings of one host and its pool)."""

    name: str
    endpoint: Endpoint
    console_command: str  # its stdout is the host's console byte stream
    power_command: str  # power-cycles the host into its known-good kernel; one per line
    boot_timeout: float  # power cycle or restart to sshd answering
    # False: the pool takes untrusted kernels, so every run ends with `reprovision_command`
    # (which must restore the known-good OS from a source no kernel could write) and a
    # power cycle.
    trusted_only: bool = True
    reprovision_command: str = ""
    known_good_release: str = ""  # `uname -r` of its known-good kernel; "" is not checked


@dataclass(frozen=True)
class LabJob:
    kernel: Path
    initrd: Path
    cmdline: str  # complete: console=, panic= and the benchmark's parameters
    console_log: Path


@dataclass
class Phases:
    """Where a lab run's time went, in seconds (the runner's own overhead beside the boot)."""

    connect: float = 0.0
    copy: float = 0.0
    load: float = 0.0  # kexec -l
    kernel: float = 0.0  # kexec -e to the end of the run (the VM runner's wall time)


@dataclass(frozen=True)
class LabRun:
    outcome: RunOutcome
    # restarted | powered-off | panicked (panic=-1 restarts at once, without "reboot:"
    # words) | hung (no end seen, or kexec -e sent and the rest unknown: needs the power
    # command) | not-started (no kexec -e)
    ending: str
    phases: Phases = field(default_factory=Phases)
    boot_id: str = ""  # the known-good kernel's, read before kexec; "" if never read


@dataclass(frozen=True)
class Restore:
    returned: bool
    power_cycles: int
    reason: str  # why not, when not returned
    seconds: float


_PLACEHOLDER = re.compile(r"\{(name|address|port)\}")


def _fill_value(field: str, value: str) -> str:
    """A host field as it may reach an argv: never read as an option (a leading `-`), never
    more than one word (whitespace or control characters). The model refuses such values
    (webapp/lab/models.py); this is the runner's own check for a row that bypassed it."""
    if not value or value.startswith("-") or any(c.isspace() or ord(c) < 32 for c in value):
        raise ValueError(f"lab host {field} {value!r:.80} is refused: empty, or starts with "
                         "'-', or holds whitespace or control characters")  # fmt: skip
    return value


def expand(template: str, host: LabHost) -> list[list[str]]:
    """The commands of a template: each non-empty line split as a shell would, then {name},
    {address} and {port} filled in within each argument (no shell ever runs them). Only
    those three are placeholders: any other brace is literal (`awk '{print}'`)."""
    values = {"name": _fill_value("name", host.name),
              "address": _fill_value("address", host.endpoint.address),
              "port": _fill_value("port", str(host.endpoint.port))}  # fmt: skip
    lines = [s for s in template.splitlines() if s.strip() and not s.lstrip().startswith("#")]
    return [
        [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in shlex.split(line)]
        for line in lines
    ]


def _execute(argv: list[str], timeout: float, on_poll: Callable[[], None] | None) -> str:
    """Run one of the operator's commands (calling `on_poll` while it runs); "" when it
    exited 0, else what went wrong, with the end of its stderr."""
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv,  # noqa: S603 -- the operator's own command
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err)  # fmt: skip
        except OSError as exc:
            return f"{argv[0]}: {exc}"
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return f"{shlex.join(argv)} timed out after {timeout:.0f} s"
            if on_poll is not None:
                on_poll()
            time.sleep(0.1)
        if proc.returncode == 0:
            return ""
        err.seek(0)
        said = err.read().decode("utf-8", "replace").strip()[-300:]
        return f"{shlex.join(argv)} exited {proc.returncode}: {said}"


def power_cycle(host: LabHost, on_poll: Callable[[], None] | None = None) -> list[str]:
    """Run the host's power command; each line's failure is reported, not fatal (destroying
    a machine that is off fails, and the start after it is what counts)."""
    try:
        commands = expand(host.power_command, host)
    except ValueError as exc:
        return [str(exc)]
    notes = [_execute(argv, _COMMAND_TIMEOUT, on_poll) for argv in commands]
    return [note for note in notes if note]


def reprovision(host: LabHost, on_poll: Callable[[], None] | None = None) -> str:
    """Run the pool's reprovision command, line by line, stopping at the first that fails;
    "" when every line succeeded, else why not. Unlike a power line, a failed line is
    fatal: the host's known-good OS may still hold what the last kernel wrote."""
    try:
        commands = expand(host.reprovision_command, host)
    except ValueError as exc:
        return str(exc)
    if not commands:
        return f"lab host {host.name} takes untrusted kernels but has no reprovision command"
    deadline = time.monotonic() + REPROVISION_TIMEOUT
    for argv in commands:
        if failed := _execute(argv, max(deadline - time.monotonic(), 1.0), on_poll):
            return failed
    return ""


def identity(client: paramiko.SSHClient) -> tuple[str, str]:
    """The running kernel's boot id (a new one at every boot) and release (`uname -r`)."""
    script = 'cat -- "$1" && uname -r'
    out = check(client, ["sh", "-c", script, "sh", str(BOOT_ID)], _SSH_TIMEOUT).split()
    if len(out) != 2 or not _BOOT_ID.match(out[0]):
        raise SSHError(f"the host's boot id and kernel release are not that: {out!r:.200}")
    return out[0], out[1]


def probe(host: LabHost) -> dict[str, object]:
    """What the host is, read from it: arch, kernel, CPUs and SMT (sysfs), kexec present."""
    client = connect(host.endpoint, _SSH_TIMEOUT)
    try:
        script = (
            "uname -m; uname -r; nproc --all; "
            "cat /sys/devices/system/cpu/smt/control 2>/dev/null || echo notsupported; "
            "lscpu -p=SOCKET,CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l; "
            "lscpu -p=SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l; "
            "command -v kexec || echo none"
        )
        out = check(client, ["sh", "-c", script], _SSH_TIMEOUT).split("\n")
    finally:
        client.close()
    arch, release, cpus, smt, cores, sockets, kexec = (s.strip() for s in out[:7])
    n_cpus, n_cores, n_sockets = int(cpus), max(int(cores), 1), max(int(sockets), 1)
    return {
        "arch": arch, "kernel_release": release, "cpus": n_cpus, "sockets": n_sockets,
        "cores": n_cores // n_sockets, "threads": max(n_cpus // n_cores, 1),
        "smt_control": smt, "kexec": kexec != "none",
    }  # fmt: skip


def run_lab(
    host: LabHost,
    job: LabJob,
    *,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None = None,
    on_boot_id: Callable[[str], None] | None = None,
    console_max_bytes: int = CONSOLE_MAX_BYTES,
) -> LabRun:
    """Boot `job` on `host` once by kexec and watch its console until the run ends, panics,
    times out or floods the console past `console_max_bytes`. The host is left where the
    kernel left it: `restore` brings it back. `on_boot_id` gets the host's boot id before
    anything is staged (for `restore`, even when this worker dies mid-run)."""
    phases = Phases()
    started = time.monotonic()
    try:
        console = expand(host.console_command, host)[0]
        client = connect(host.endpoint, _SSH_TIMEOUT)
    except (ValueError, SSHError) as exc:  # a refused host field, or no ssh
        return LabRun(RunOutcome(INFRA, str(exc), "", 0.0, None), "not-started", phases)
    phases.connect = time.monotonic() - started
    boot_id, loaded, executed = "", False, False

    def ended(outcome: RunOutcome, ending: str) -> LabRun:
        return LabRun(outcome, ending, phases, boot_id)

    try:
        boot_id = identity(client)[0]
        if on_boot_id is not None:
            on_boot_id(boot_id)
        loaded = True  # from the first try on: a failed or cut load is unloaded below
        status, err = _load(client, job, phases)
        if status != 0:  # the host's kexec refused this kernel image: the kernel's failure
            why = f"kexec refused the kernel: {err.strip()[-500:]}"
            return ended(RunOutcome(BOOT_FAILED, why, "", 0.0, None), "not-started")
        job.console_log.parent.mkdir(parents=True, exist_ok=True)
        job.console_log.write_bytes(b"")
        # Appending, so that dropping what came before the boot (_drain) truncates it.
        with job.console_log.open("ab") as sink:
            watcher = subprocess.Popen(  # noqa: S603 -- the operator's own command
                console, stdout=sink,
                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            if not _drain(job.console_log, watcher):
                why = f"the console command exited ({watcher.returncode}) before the boot"
                return ended(RunOutcome(INFRA, why, "", 0.0, None), "not-started")
            check(client, ["sh", "-c", _CLEAR, "sh", str(STAGE_DIR)], _SSH_TIMEOUT)
            executed = True  # from here on the kernel under test may run, whatever ssh says
            # Detached, so the session ends cleanly before the kernel goes.
            check(client, ["sh", "-c", "(sleep 1; sync; kexec -e) >/dev/null 2>&1 &"],
                  _SSH_TIMEOUT)  # fmt: skip
            client.close()
            kexec_at = time.monotonic()
            out, ending = _watch(ConsoleFile(job.console_log, console_max_bytes), watcher,
                                 kexec_at, boot_timeout, run_timeout, on_poll)  # fmt: skip
            phases.kernel = out.wall_seconds
            return ended(out, ending)
        finally:
            _stop(watcher)
    except SSHError as exc:
        outcome = RunOutcome(INFRA, str(exc), "", time.monotonic() - started, None)
        return ended(outcome, "hung" if executed else "not-started")
    finally:
        if loaded and not executed:  # neither a loaded image nor a cut copy waits there
            with contextlib.suppress(SSHError):
                run(client, ["kexec", "-u"], _SSH_TIMEOUT)
                run(client, ["sh", "-c", _CLEAR, "sh", str(STAGE_DIR)], _SSH_TIMEOUT)
        client.close()


def _load(client: paramiko.SSHClient, job: LabJob, phases: Phases) -> tuple[int, str]:
    """Stage the kernel and initramfs on the emptied tmpfs, `kexec -l` them, and delete
    them whether kexec took them or not; kexec's exit status and stderr."""
    started = time.monotonic()
    check(client, ["sh", "-c", _PREPARE, "sh", str(STAGE_DIR), str(LEGACY_DIR)], _SSH_TIMEOUT)
    kernel, initrd = STAGE_DIR / "kernel", STAGE_DIR / "initrd"
    for local, remote in ((job.kernel, kernel), (job.initrd, initrd)):
        put(client, local, remote, _SSH_TIMEOUT * 4)
    phases.copy = time.monotonic() - started
    loading = time.monotonic()
    status, _, err = run(client, ["kexec", "-l", str(kernel), f"--initrd={initrd}",
                                  f"--command-line={job.cmdline}"], _SSH_TIMEOUT)  # fmt: skip
    phases.load = time.monotonic() - loading
    check(client, ["sh", "-c", _CLEAR, "sh", str(STAGE_DIR)], _SSH_TIMEOUT)
    return status, err


def _drain(path: Path, watcher: subprocess.Popen[bytes]) -> bool:
    """Wait until the console command has printed nothing for a moment, then drop what it
    printed: the known-good OS's lines, or a console server's replay of earlier runs (a
    restricted comparison's, maybe), belong to no run. False if the command exited."""
    deadline = time.monotonic() + _CONSOLE_DRAIN_MAX
    size = -1
    while time.monotonic() < deadline:
        time.sleep(_CONSOLE_SETTLE)
        if watcher.poll() is not None:
            return False
        now = path.stat().st_size
        if now == size:
            break
        size = now
    path.write_bytes(b"")  # the command appends: its next byte lands at offset 0
    return True


def _watch(
    console: ConsoleFile,
    watcher: subprocess.Popen[bytes],
    started: float,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None,
) -> tuple[RunOutcome, str]:
    """The VM runner's watch (engine/vm/runner.py) where the machine's power state is only
    known from the console: its last words (restart, power down) end the run."""
    watch = BootWatch(console, started)
    scan = console.scan
    try:
        while True:
            time.sleep(POLL)
            now = time.monotonic()
            watch.see(now)
            if on_poll is not None:
                on_poll()
            ended = scan.powered_off or scan.restarting
            ending = "powered-off" if scan.powered_off else "restarted"
            if flood := watch.flood():
                return watch.outcome(*flood, console.finish(), now), "hung"
            if watch.fatal_at is not None and (ended or watch.panic_settled(now)):
                # The backtrace is in; the lab command line's panic=-1 restarts the host.
                how = "powered-off" if scan.powered_off else "panicked"
                return watch.outcome(PANIC, scan.fatal, console.finish(), now), how
            if ended:
                text = console.finish()
                if not scan.init_reached:
                    why = "the kernel restarted before it ran init"
                    return watch.outcome(BOOT_FAILED, why, text, now), ending
                return watch.outcome(OK, ending, text, now), ending
            if watcher.poll() is not None:
                why = f"the console command exited ({watcher.returncode}) during the run"
                return watch.outcome(INFRA, why, console.finish(), now), "hung"
            if limit := watch.over_limit(now, boot_timeout, run_timeout):
                return watch.outcome(*limit, console.finish(), now), "hung"
    finally:
        console.close()


def _stop(watcher: subprocess.Popen[bytes]) -> None:
    if watcher.poll() is None:
        watcher.terminate()
        try:
            watcher.wait(5)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()


def restore(
    host: LabHost,
    ending: str,
    *,
    tries: int,
    boot_id: str = "",
    on_recovering: Callable[[int, str], None] | None = None,
    on_poll: Callable[[], None] | None = None,
) -> Restore:
    """Bring the host back to its known-good kernel after a run that ended as `ending`.

    A pool that takes untrusted kernels is reprovisioned and power-cycled after every run.
    On a trusted-only pool a restarted or panicked host is waited for; a powered-off or
    hung one is power-cycled at once, as the expected way back, not a recovery. The host
    is back when sshd answers, its boot id is not `boot_id` (read before kexec; "" when
    unknown) and it runs `host.known_good_release`; else it is power-cycled again
    (`on_recovering(try, why)`), up to `tries` times."""
    started = time.monotonic()
    cycles, why = 0, ""
    notes: list[str] = []
    if not host.trusted_only or ending in ("powered-off", "hung"):
        why, notes, cycled = _cycle(host, on_poll)
        cycles += cycled
    for attempt in range(tries + 1):
        why = why or _returned(host, boot_id, on_poll)
        if not why:
            return Restore(True, cycles, "", time.monotonic() - started)
        if attempt == tries:
            break
        if on_recovering is not None:
            on_recovering(attempt + 1, why)
        why, notes, cycled = _cycle(host, on_poll)
        cycles += cycled
    reason = f"{why} after {cycles} power cycles"
    if notes:  # what the power command said the last time: the operator's first clue
        reason += f" (power command: {'; '.join(notes)})"
    return Restore(False, cycles, reason[:2000], time.monotonic() - started)


def _cycle(host: LabHost, on_poll: Callable[[], None] | None) -> tuple[str, list[str], int]:
    """Reprovision the host (a pool that takes untrusted kernels), then power-cycle it: why
    not, when the reprovision failed (the host is not power-cycled then), the power
    command's notes, and the power cycles run (0 or 1)."""
    if not host.trusted_only and (failed := reprovision(host, on_poll)):
        return f"the reprovision command failed: {failed}", [], 0
    return "", power_cycle(host, on_poll), 1


def _returned(host: LabHost, boot_id: str, on_poll: Callable[[], None] | None) -> str:
    """Why the host is not back on its known-good kernel in a new boot; "" when it is."""
    if not _wait_ssh(host, on_poll):
        return f"sshd did not answer within {host.boot_timeout:.0f} s"
    try:
        client = connect(host.endpoint, _SSH_TIMEOUT)
        try:
            now, release = identity(client)
        finally:
            client.close()
    except SSHError as exc:
        return f"the host answered, then failed: {exc}"
    if boot_id and now == boot_id:
        return (f"the boot id {now} did not change: the host did not reboot (a kernel that "
                "printed its restart and kept running?)")  # fmt: skip
    if host.known_good_release and release != host.known_good_release:
        return (f"it runs kernel {release}, not its known-good {host.known_good_release} "
                "(probe the host again if that kernel was upgraded)")  # fmt: skip
    return ""


def _wait_ssh(host: LabHost, on_poll: Callable[[], None] | None) -> bool:
    deadline = time.monotonic() + host.boot_timeout
    while time.monotonic() < deadline:
        if on_poll is not None:
            on_poll()
        if answers(host.endpoint, timeout=min(10.0, max(deadline - time.monotonic(), 1.0))):
            return True
        time.sleep(min(2.0, max(deadline - time.monotonic(), 0.0)))
    return False
