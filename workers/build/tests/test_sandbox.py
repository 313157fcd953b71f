"""The build sandbox: a submitter's Makefile cannot write outside, nor reach the network.

Each hostile step is first run without the sandbox to show it does succeed on this host,
so a passing test means the sandbox stopped it, not that the step was broken.
"""

import io
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.build.sandbox import Sandbox, StepTimeout, run_logged

MAKEFILE = """\
inside:
\techo built > $(OBJ)/ok
outside:
\techo pwned > $(OUTSIDE)/pwned
source:
\techo pwned > $(SRC)/pwned
network:
\tbash -c 'exec 3<>/dev/tcp/127.0.0.1/6379 && echo PING >&3 && head -c5 <&3'
secrets:
\tcat $(SECRET)
"""


@pytest.fixture
def tree() -> Iterator[dict[str, Path]]:
    # Under /var/tmp, not pytest's tmp_path: the build user must be able to reach the dirs
    # (pytest's are private to root), and the sandbox has its own /tmp.
    base = Path(tempfile.mkdtemp(prefix="rcubench-sandbox-", dir="/var/tmp"))
    base.chmod(0o755)
    src, obj = base / "src", base / "obj"
    src.mkdir()
    obj.mkdir()
    (src / "Makefile").write_text(MAKEFILE)
    # Writable by anyone: only the sandbox can stop a write there.
    outside = base / "outside"
    outside.mkdir()
    for path in (src, outside):
        path.chmod(0o777)
    secret = outside / "secret"
    secret.write_text("database password\n")
    secret.chmod(0o644)
    yield {"src": src, "obj": obj, "outside": outside, "secret": secret}
    subprocess.run(["rm", "-rf", "--", str(base)], check=True)


def _make(tree: dict[str, Path], target: str, *, sandboxed: bool) -> tuple[int, str]:
    argv = [
        "make", "-C", str(tree["src"]), target,
        f"OBJ={tree['obj']}", f"OUTSIDE={tree['outside']}", f"SRC={tree['src']}",
        f"SECRET={tree['secret']}",
    ]  # fmt: skip
    log = io.StringIO()
    if sandboxed:
        sandbox = Sandbox(readable=(tree["src"],), writable=(tree["obj"],))
        sandbox.prepare()
        cmd = sandbox.command(argv, cwd=tree["obj"])
    else:
        cmd = argv
    return run_logged(cmd, log=log, timeout=60, shown=argv), log.getvalue()


def test_a_step_inside_the_sandbox_writes_its_object_dir(tree):
    status, log = _make(tree, "inside", sandboxed=True)
    assert status == 0, log
    assert (tree["obj"] / "ok").read_text() == "built\n"


@pytest.mark.parametrize(("target", "written"), [("outside", "outside"), ("source", "src")])
def test_a_makefile_cannot_write_outside_the_object_dir(tree, target, written):
    status, _ = _make(tree, target, sandboxed=False)
    assert status == 0
    assert (tree[written] / "pwned").exists()
    (tree[written] / "pwned").unlink()

    status, log = _make(tree, target, sandboxed=True)
    assert status != 0
    assert re.search(r"nonexistent|No such file|Read-only file system", log), log
    assert not (tree[written] / "pwned").exists()


def test_a_makefile_cannot_open_a_network_connection(tree):
    status, log = _make(tree, "network", sandboxed=False)
    assert status == 0, log
    assert "+PONG" in log, log  # Redis answers on this host

    status, log = _make(tree, "network", sandboxed=True)
    assert status != 0
    assert "Connection refused" in log, log
    assert "+PONG" not in log


def test_a_makefile_cannot_read_host_files_outside_its_tree(tree):
    status, log = _make(tree, "secrets", sandboxed=False)
    assert status == 0
    assert "database password" in log

    status, log = _make(tree, "secrets", sandboxed=True)
    assert status != 0
    assert "database password" not in log


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to the build user needs root")
def test_the_sandboxed_step_runs_as_the_unprivileged_build_user(tree):
    (tree["src"] / "Makefile").write_text("who:\n\tid -un > $(OBJ)/who\n")
    status, log = _make(tree, "who", sandboxed=True)
    assert status == 0, log
    assert (tree["obj"] / "who").stat().st_uid != 0


def test_a_step_past_its_time_limit_is_killed():
    started = time.monotonic()
    with pytest.raises(StepTimeout, match="killed after 1 s"):
        run_logged(["sleep", "30"], log=io.StringIO(), timeout=1)
    assert time.monotonic() - started < 10
