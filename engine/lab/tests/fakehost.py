"""A lab host without a machine, for the runner's command sequence (no VM, a second a test).

It is a real ssh server to the runner (paramiko's server side: the host key pinned, one
client key, exec and sftp) on a loopback port. Each command runs in a local `sh` with the
host's paths mapped into the test's directories:
- the staging directory (`STAGE_DIR`) onto a directory of /dev/shm, a tmpfs;
- the legacy disk directory (`LEGACY_DIR`) into the test's directory;
- the boot id (`BOOT_ID`) onto a file that only `reboot()` (the tests' power commands)
  changes: the host keeps its boot id, and answers ssh with the pinned key, whatever the
  kernel under test printed, like a kernel that printed its restart and kept running;
- `kexec` onto a script that records each call with what the staging directory held at
  that moment (and refuses the image if told to), `sync` onto a no-op.
A command that still names a host path after the mapping is refused, so nothing of this
machine outside the test's directories is touched.
"""

import errno
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko
import pytest
from paramiko.common import (
    AUTH_FAILED,
    AUTH_SUCCESSFUL,
    OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED,
    OPEN_SUCCEEDED,
)

from engine.lab.runner import BOOT_ID, LEGACY_DIR, STAGE_DIR, LabHost
from engine.lab.ssh import Endpoint

SHM = Path("/dev/shm")
_HOST_PATHS = ("/run/", "/var/lib/rcubench", "/proc/sys/kernel/random")

_KEXEC = """#!/bin/sh
# The fake host's kexec: one line a call, "<op> <what the staging directory holds>".
staged=$(ls -A "{stage}" 2>/dev/null | sort | tr '\\n' ' ')
case $1 in
  -l) echo "load $staged" >>"{log}"; rm -f "{booted}"
      if [ -e "{refuse}" ]; then echo "kexec_file_load failed: Invalid argument" >&2; exit 1; fi
      cp -- "$2" "{loaded}" ;;
  -e) echo "exec $staged" >>"{log}"; touch "{booted}" ;;
  -u) echo "unload" >>"{log}" ;;
  *) echo "kexec: unexpected $*" >&2; exit 2 ;;
esac
"""


@dataclass
class FakeHost:
    """What a test reads and changes of the fake host (its files are the test's)."""

    name: str
    endpoint: Endpoint
    root: Path
    stage: Path  # STAGE_DIR, on /dev/shm
    legacy: Path  # LEGACY_DIR
    boot_id_file: Path  # BOOT_ID
    kexec_log: Path
    loaded: Path  # a copy of the kernel `kexec -l` was given
    booted: Path  # exists once `kexec -e` ran (until the next `kexec -l`)
    refuse: Path  # while it exists, `kexec -l` refuses the image

    @property
    def boot_id(self) -> str:
        return self.boot_id_file.read_text().strip()

    def reboot(self) -> None:
        self.boot_id_file.write_text(f"{uuid.uuid4()}\n")

    def kexec_calls(self) -> list[tuple[str, list[str]]]:
        """Each kexec call: its op (load, exec, unload) and the staging directory's files."""
        if not self.kexec_log.exists():
            return []
        lines = self.kexec_log.read_text().splitlines()
        return [(op, rest.split()) for op, _, rest in (line.partition(" ") for line in lines)]

    def lab_host(self, **change: object) -> LabHost:
        """The runner's view: the console a script that prints a replay of an earlier run
        at once, then, once `kexec -e` ran, a kernel that restarts (it says), and keeps
        running; power commands a test gives."""
        console = (
            f"sh -c 'echo a previous run: RESTRICTED-BYTES; "
            f'while [ ! -e {self.booted} ]; do sleep 0.05; done; '
            f'echo "[    0.000000] Linux version 6.12.0 (rcubench)"; '
            f'echo "[    0.900000] Run /init as init process"; '
            f'echo "[    1.000000] reboot: Restarting system"; exec sleep 600\''
        )  # fmt: skip
        host = LabHost(name=self.name, endpoint=self.endpoint, console_command=console,
                       power_command="true", boot_timeout=5.0)  # fmt: skip
        return replace(host, **change)  # type: ignore[arg-type]

    def reboot_command(self, mark: str = "power") -> str:
        """A power command (or reprovision line) that appends `mark` to the root's `order`
        file; with mark "power" it also reboots the fake host (a new boot id)."""
        order = self.root / "order"
        script = f"echo {mark} >> {order}"
        if mark == "power":
            script += f"; cat /proc/sys/kernel/random/uuid > {self.boot_id_file}"
        return f"sh -c {shlex.quote(script)}"

    def order(self) -> list[str]:
        path = self.root / "order"
        return path.read_text().split() if path.exists() else []


class _Files(paramiko.SFTPServerInterface):
    """sftp on the mapped paths: what `put` needs (open, write, stat, rename, remove)."""

    def __init__(self, server: paramiko.ServerInterface, host: "_Server") -> None:
        super().__init__(server)
        self.host = host

    def _local(self, path: str) -> str | None:
        mapped = self.host.map(path)
        return None if any(p in mapped for p in _HOST_PATHS) else mapped

    def open(
        self, path: str, flags: int, attr: paramiko.SFTPAttributes
    ) -> paramiko.SFTPHandle | int:
        local = self._local(path)
        if local is None:
            return paramiko.sftp.SFTP_PERMISSION_DENIED
        try:
            fd = os.open(local, flags, 0o600)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)
        handle = paramiko.SFTPHandle(flags)
        handle.filename = local  # type: ignore[attr-defined]
        mode = "r+b" if flags & os.O_RDWR else "wb" if flags & os.O_WRONLY else "rb"
        handle.readfile = handle.writefile = os.fdopen(fd, mode)  # type: ignore[attr-defined]
        return handle

    def stat(self, path: str) -> paramiko.SFTPAttributes | int:
        local = self._local(path)
        if local is None:
            return paramiko.sftp.SFTP_PERMISSION_DENIED
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(local))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)

    def lstat(self, path: str) -> paramiko.SFTPAttributes | int:
        return self.stat(path)  # no links in the fake host's directories

    def remove(self, path: str) -> int:
        local = self._local(path)
        if local is None:
            return paramiko.sftp.SFTP_PERMISSION_DENIED
        os.remove(local)
        return paramiko.sftp.SFTP_OK

    def rename(self, oldpath: str, newpath: str) -> int:
        old, new = self._local(oldpath), self._local(newpath)
        if old is None or new is None:
            return paramiko.sftp.SFTP_PERMISSION_DENIED
        os.rename(old, new)
        return paramiko.sftp.SFTP_OK


class _Server(paramiko.ServerInterface):
    def __init__(self, fake: FakeHost, client_key: paramiko.PKey, bin_dir: Path) -> None:
        self.fake, self.client_key = fake, client_key
        self.env = {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}

    def map(self, text: str) -> str:
        """`text` with the host's paths replaced by the test's (read at each call: a test
        may move the staging directory)."""
        fake = self.fake
        for host_path, local in ((STAGE_DIR, fake.stage), (LEGACY_DIR, fake.legacy),
                                 (BOOT_ID, fake.boot_id_file)):  # fmt: skip
            text = text.replace(str(host_path), str(local))
        return text

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        mine = key.get_base64() == self.client_key.get_base64()
        return AUTH_SUCCESSFUL if username == "root" and mine else AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return OPEN_SUCCEEDED
        return OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        threading.Thread(target=self._exec, args=(channel, command.decode()), daemon=True).start()
        return True

    def _exec(self, channel: paramiko.Channel, command: str) -> None:
        mapped = self.map(command)
        if any(p in mapped for p in _HOST_PATHS):
            channel.sendall_stderr(f"fake host: unmapped host path in {command!r}\n".encode())
            status = 99
        else:
            done = subprocess.run(["sh", "-c", mapped], capture_output=True, env=self.env,
                                  cwd=self.fake.root, timeout=60, check=False)  # fmt: skip
            channel.sendall(done.stdout)
            channel.sendall_stderr(done.stderr)
            status = done.returncode
        channel.send_exit_status(status)
        # EOF, not close: paramiko answers the exec request only after
        # check_channel_exec_request returns, and a channel closed before that answer is
        # "Channel closed" to the client. The client closes it once it has read.
        channel.shutdown_write()


def _serve(listener: socket.socket, server: _Server, host_key: paramiko.PKey,
           transports: list[paramiko.Transport], stop: threading.Event) -> None:  # fmt: skip
    listener.settimeout(0.2)  # a blocked accept() would not see the listener close
    while not stop.is_set():
        try:
            sock, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        sock.settimeout(None)
        transport = paramiko.Transport(sock)
        transport.add_server_key(host_key)
        transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _Files, server)
        transports.append(transport)
        try:
            transport.start_server(event=threading.Event(), server=server)
        except paramiko.SSHException:
            transport.close()


@pytest.fixture
def fake_host(tmp_path: Path) -> Iterator[FakeHost]:
    assert SHM.is_dir(), "the fake host stages on /dev/shm (a tmpfs)"
    shm = Path(tempfile.mkdtemp(prefix="rcubench-fakehost-", dir=SHM))
    root = tmp_path / "host"
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    host_key, client_key = paramiko.ECDSAKey.generate(), paramiko.ECDSAKey.generate()
    key_file = root / "id_ecdsa"
    client_key.write_private_key_file(str(key_file))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    endpoint = Endpoint("127.0.0.1", listener.getsockname()[1], "root", key_file,
                        f"{host_key.get_name()} {host_key.get_base64()}")  # fmt: skip
    fake = FakeHost(name="fake-1", endpoint=endpoint, root=root, stage=shm / "stage",
                    legacy=root / "legacy", boot_id_file=root / "boot_id",
                    kexec_log=root / "kexec.log", loaded=root / "loaded",
                    booted=root / "booted", refuse=root / "refuse")  # fmt: skip
    fake.reboot()
    kexec = bin_dir / "kexec"
    kexec.write_text(_KEXEC.format(stage=fake.stage, log=fake.kexec_log, loaded=fake.loaded,
                                   booted=fake.booted, refuse=fake.refuse))  # fmt: skip
    (bin_dir / "sync").write_text("#!/bin/sh\n")  # no disks of its own to flush
    for script in (kexec, bin_dir / "sync"):
        script.chmod(0o755)
    transports: list[paramiko.Transport] = []
    server, stop = _Server(fake, client_key, bin_dir), threading.Event()
    serving = threading.Thread(target=_serve, args=(listener, server, host_key, transports,
                                                    stop), daemon=True)  # fmt: skip
    serving.start()
    try:
        yield fake
    finally:
        stop.set()
        serving.join(5)
        listener.close()
        for transport in transports:
            transport.close()
        shutil.rmtree(shm, ignore_errors=True)
