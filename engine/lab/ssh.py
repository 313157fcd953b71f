"""ssh to a lab host with its host key pinned: no trust on first use, no agent, one key.

A host whose key differs from the pinned one is refused (paramiko's RejectPolicy with only
the pinned key known), so a machine that took the host's address gets nothing, not even
the kernel under test.
"""

import base64
import binascii
import logging
import shlex
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import paramiko

from engine.build.artifacts import file_sha256

# paramiko logs every failed handshake from its transport thread ("Error reading SSH protocol
# banner" while a host boots and its port already accepts): the caller gets each failure as
# an SSHError with its reason, so these lines are noise in the worker's log.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)


class SSHError(RuntimeError):
    """The host could not be reached, refused us, or a command failed; the message says which."""


@dataclass(frozen=True)
class Endpoint:
    address: str
    port: int
    user: str
    key_file: Path  # the runner's private key on this worker host
    host_key: str  # the pinned public key, "<type> <base64>" (as in known_hosts)


def _pinned(endpoint: Endpoint) -> tuple[str, paramiko.PKey]:
    try:
        kind, data = endpoint.host_key.split()[:2]
        key = paramiko.PKey.from_type_string(kind, base64.b64decode(data, validate=True))
    except (ValueError, binascii.Error, paramiko.SSHException) as exc:
        raise SSHError(f"the pinned host key of {endpoint.address} is not a key: {exc}") from exc
    name = endpoint.address if endpoint.port == 22 else f"[{endpoint.address}]:{endpoint.port}"
    return name, key


def connect(endpoint: Endpoint, timeout: float = 15.0) -> paramiko.SSHClient:
    name, key = _pinned(endpoint)
    client = paramiko.SSHClient()
    client.get_host_keys().add(name, key.get_name(), key)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            endpoint.address, port=endpoint.port, username=endpoint.user,
            key_filename=str(endpoint.key_file), look_for_keys=False, allow_agent=False,
            timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
        )  # fmt: skip
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise SSHError(f"{endpoint.address}:{endpoint.port} offered a host key that is not "
                       f"the pinned one ({exc.key.get_name()})") from exc  # fmt: skip
    except (OSError, paramiko.SSHException, EOFError) as exc:
        client.close()
        why = str(exc) or type(exc).__name__
        raise SSHError(f"cannot ssh to {endpoint.user}@{endpoint.address}:{endpoint.port}: "
                       f"{why}") from exc  # fmt: skip
    return client


def answers(endpoint: Endpoint, timeout: float = 10.0) -> bool:
    """Whether the host takes an ssh session and runs a command in it now."""
    try:
        client = connect(endpoint, timeout)
    except SSHError:
        return False
    try:
        return run(client, ["true"], timeout)[0] == 0
    except SSHError:
        return False
    finally:
        client.close()


def run(client: paramiko.SSHClient, argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run `argv` (quoted for the remote shell); its exit status, stdout and stderr."""
    try:
        _, out, err = client.exec_command(shlex.join(argv), timeout=timeout)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
        return out.channel.recv_exit_status(), stdout, stderr
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise SSHError(f"{argv[0]} on the host: {exc or type(exc).__name__}") from exc


def check(client: paramiko.SSHClient, argv: list[str], timeout: float) -> str:
    """Run `argv`; its stdout, or SSHError with its stderr if it failed."""
    status, out, err = run(client, argv, timeout)
    if status != 0:
        raise SSHError(f"{shlex.join(argv)} exited {status}: {err.strip()[-500:]}")
    return out


def put(client: paramiko.SSHClient, local: Path, remote: PurePosixPath, timeout: float) -> float:
    """Copy `local` to `remote`; return the seconds spent. The copy goes to a temporary
    name, is checked by its sha256 on the host, and only then renamed into place, so a cut
    copy is never booted."""
    started = time.monotonic()
    digest = file_sha256(local)
    part = remote.with_name(f".{remote.name}.part")
    try:
        with client.open_sftp() as sftp:
            sftp.get_channel().settimeout(timeout)  # type: ignore[union-attr]
            sftp.put(str(local), str(part))
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise SSHError(f"copying {local.name} to the host: {exc or type(exc).__name__}") from exc
    got = check(client, ["sha256sum", str(part)], timeout).split()[:1]
    if got != [digest]:
        raise SSHError(f"{local.name} arrived with sha256 {got[0] if got else '?'}, "
                       f"not {digest}")  # fmt: skip
    check(client, ["mv", "-f", str(part), str(remote)], timeout)
    return time.monotonic() - started
