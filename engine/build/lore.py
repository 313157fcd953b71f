"""Patch series from lore.kernel.org by message-id, with b4 (`b4 am`).

b4 finds the whole thread, picks the latest revision of the series, orders the patches
and folds in trailers (Reviewed-by, Acked-by) from the replies; the result is the mbox
`git am` takes. Tests give b4 a local mbox (`-m`) instead of the network.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_MSGID = re.compile(r"^[^\s<>\"'/\\@-][^\s<>\"'/\\@]*@[^\s<>\"'/\\@]+$")


class LoreError(RuntimeError):
    """The series could not be fetched (bad message-id, lore unreachable, not found)."""


def validate_message_id(message_id: str) -> str:
    """`message_id` without its angle brackets, or LoreError naming what is wrong."""
    bare = message_id.strip().removeprefix("<").removesuffix(">")
    if not _MSGID.match(bare):
        raise LoreError(f"{message_id!r} is not a message-id (local-part@domain)")
    return bare


def _b4() -> str:
    beside = Path(sys.executable).parent / "b4"  # the virtualenv's, when not on PATH
    found = str(beside) if beside.exists() else shutil.which("b4")
    if found is None:
        raise LoreError("b4 is not installed (run scripts/setup.sh)")
    return found


def fetch_series(message_id: str, *, local_mbox: Path | None = None, timeout: float = 120) -> bytes:
    """The am-ready mbox of the series `message_id` belongs to."""
    bare = validate_message_id(message_id)
    with tempfile.TemporaryDirectory(prefix="rcubench-b4-") as out:
        cmd = [_b4(), "--no-interactive"]
        if local_mbox is not None:
            cmd += ["--offline-mode", "am", "-m", str(local_mbox)]
        else:
            cmd += ["am"]
        cmd += ["--no-cache", "-o", out, "-n", "series"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(HOME=out, XDG_CACHE_HOME=out, XDG_CONFIG_HOME=out, GIT_CONFIG_NOSYSTEM="1")
        try:
            result = subprocess.run(
                [*cmd, bare], capture_output=True, text=True, timeout=timeout, env=env, cwd=out,
                check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise LoreError(f"b4 did not answer within {timeout:.0f} s for <{bare}>") from exc
        mbox = Path(out) / "series.mbx"
        if result.returncode != 0 or not mbox.exists():
            said = (result.stderr or result.stdout).strip().splitlines()
            raise LoreError(f"cannot fetch <{bare}> with b4: {said[-1] if said else 'no output'}")
        return mbox.read_bytes()
