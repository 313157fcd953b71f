"""Host-side access to files a sandboxed build could have written or replaced.

A build's object directory is writable by the submitter's Makefile, so any name in it may be
a symlink to a host secret, a FIFO that blocks a reader forever, a hard link, or a huge or
endless file (`System.map -> /dev/zero`). Host-side code reads and copies such files only
through these functions: the last component is opened with O_NOFOLLOW (and O_NONBLOCK, so a
FIFO cannot block the open), the opened file must be a regular file with one link, and no
more than `limit` bytes are read. Every refusal is an UnsafeFile naming the file and why.
"""

import os
import stat
from pathlib import Path

_CHUNK = 1 << 20


class UnsafeFile(RuntimeError):
    """A file from a build directory is not a plain regular file of acceptable size."""


def _open_regular(path: Path, limit: int) -> tuple[int, int]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symlink; anything else: unreadable
        kind = "a symbolic link" if path.is_symlink() else f"unreadable ({exc.strerror})"
        raise UnsafeFile(f"{path.name} is {kind}; refused") from None
    st = os.fstat(fd)
    why = ""
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file"
    elif st.st_nlink != 1:
        why = f"a hard link ({st.st_nlink} names)"
    elif st.st_size > limit:
        why = f"{st.st_size} bytes, over the limit of {limit}"
    if why:
        os.close(fd)
        raise UnsafeFile(f"{path.name} is {why}; refused")
    return fd, st.st_mode


def read_bytes(path: Path, limit: int) -> bytes:
    """The whole content of the regular file `path`, at most `limit` bytes."""
    fd, _ = _open_regular(path, limit)
    try:
        data = bytearray()
        while len(data) <= limit and (chunk := os.read(fd, _CHUNK)):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the size check
        raise UnsafeFile(f"{path.name} grew past the limit of {limit} bytes; refused")
    return bytes(data)


def read_text(path: Path, limit: int) -> str:
    return read_bytes(path, limit).decode("utf-8", "replace")


def copy(src: Path, dst: Path, limit: int) -> None:
    """Copy the regular file `src` to a new file `dst` (which must not exist yet)."""
    fd, mode = _open_regular(src, limit)
    copied = 0
    try:
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      stat.S_IMODE(mode) & 0o755 | 0o644)  # fmt: skip
        try:
            while chunk := os.read(fd, _CHUNK):
                copied += len(chunk)
                if copied > limit:
                    raise UnsafeFile(f"{src.name} grew past the limit of {limit} bytes; refused")
                os.write(out, chunk)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def write_text(path: Path, text: str) -> None:
    """Write `path` afresh without following a symlink or writing into a FIFO put there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
