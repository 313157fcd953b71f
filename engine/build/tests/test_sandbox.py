"""The build sandbox: a submitter's Makefile cannot write outside, nor reach the network.

Each hostile step is first run without the sandbox to show it does succeed on this host,
so a passing test means the sandbox stopped it, not that the step was broken.
"""

import io
import os
import pwd
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.build.sandbox import Limits, Sandbox, StepTimeout, cgroup, run_logged

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
    # Redis answers on this host: PONG, or NOAUTH once it has a password (setup.sh's).
    assert "+PONG" in log or "-NOAU" in log, log

    status, log = _make(tree, "network", sandboxed=True)
    assert status != 0
    assert "Connection refused" in log, log
    assert "+PONG" not in log
    assert "-NOAU" not in log


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


@pytest.fixture
def etc_secret() -> Iterator[tuple[Path, str]]:
    """A secret under /etc readable by the group `rcubench-build`, as a non-root worker's
    /etc/rcubench.env is readable by the worker's group."""
    value = f"DJANGO_SECRET_KEY={os.urandom(8).hex()}"
    path = Path(f"/etc/rcubench-test-{os.urandom(4).hex()}.env")
    path.write_text(value + "\n")
    os.chown(path, 0, pwd.getpwnam("rcubench-build").pw_gid)
    path.chmod(0o640)
    yield path, value
    path.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="playing a non-root worker needs root")
def test_a_non_root_worker_sandbox_shows_no_etc_secret(tree, etc_secret):
    path, value = etc_secret
    entry = pwd.getpwnam("rcubench-build")
    # A worker that is not root (Ansible's User=rcubench) and may read the file: no drop
    # to another user happens, so only what is bound keeps the secret out.
    as_worker = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                 "--init-groups", "--"]  # fmt: skip
    plain = subprocess.run([*as_worker, "cat", str(path)], capture_output=True, text=True)
    assert plain.stdout.strip() == value  # the worker itself can read it
    sandbox = Sandbox(readable=(), writable=(tree["obj"],))
    inner = sandbox.command(["sh", "-c", f"cat {path}; ls /etc"], cwd=tree["obj"])
    # Built as root, the command starts with the drop to the build user: a non-root worker
    # has none, so it is cut, and the rest runs as the (already unprivileged) worker.
    assert inner[0] == "setpriv"
    inner = inner[inner.index("--") + 1 :]
    run = subprocess.run([*as_worker, *inner], capture_output=True, text=True, timeout=60)
    assert value not in run.stdout + run.stderr
    assert "No such file or directory" in run.stderr
    assert path.name not in run.stdout  # /etc inside has only what a build needs


@pytest.mark.parametrize(
    ("script", "limits", "expected"),
    [
        ("python3 -c 'bytearray(512 * 2**20)'", Limits(memory_bytes=256 * 2**20), "MemoryError"),
        ("head -c 2000000 /dev/zero > big", Limits(max_file_bytes=2**20), "File size limit"),
        ("for i in $(seq 200); do sleep 2 & done; wait", Limits(max_processes=50), "Cannot fork"),
    ],
)  # fmt: skip
def test_a_step_is_held_to_its_memory_file_size_and_process_limits(tree, script, limits, expected):
    unlimited = Sandbox(readable=(), writable=(tree["obj"],))
    unlimited.prepare()
    log = io.StringIO()
    status = run_logged(unlimited.command(["sh", "-c", script], cwd=tree["obj"]), log=log,
                        timeout=60)  # fmt: skip
    assert status == 0, log.getvalue()  # the step itself works without the limit
    with cgroup("test", limits) as procs:
        sandbox = Sandbox(readable=(), writable=(tree["obj"],), limits=limits, cgroups=procs)
        log = io.StringIO()
        status = run_logged(sandbox.command(["sh", "-c", script], cwd=tree["obj"]), log=log,
                            timeout=60)  # fmt: skip
    assert status != 0, log.getvalue()
    assert expected in log.getvalue(), log.getvalue()


def test_long_lines_and_long_logs_are_cut_without_holding_them():
    limits = Limits(max_line_chars=100, max_log_bytes=10_000)
    # One 5 MB line, then 100k short lines: neither ends up whole in the log.
    script = "head -c 5000000 /dev/zero | tr '\\0' x; echo; seq 100000; echo done"
    log = io.StringIO()
    status = run_logged(["sh", "-c", script], log=log, timeout=60, limits=limits)
    text = log.getvalue()
    assert status == 0
    assert "x" * 100 + "[rcubench: line cut, 4999900 more characters]" in text
    assert len(text) < 11_000
    assert "more characters of output not kept: the log limit is 10000 bytes" in text
