"""contrib/post-receive for real: a bare repository with the hook installed, a push from a
clone, and the Django live server receiving the signed request."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from webapp.watch.models import Push
from webapp.webhooks.models import Delivery
from webapp.webhooks.tests.conftest import Hooked

HOOK = Path(__file__).resolve().parents[3] / "contrib" / "post-receive"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Paul E. McKenney",
    "GIT_AUTHOR_EMAIL": "paulmck@example.org",
    "GIT_COMMITTER_NAME": "Paul E. McKenney",
    "GIT_COMMITTER_EMAIL": "paulmck@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def repos(tmp_path):
    """A bare repository with the hook, and a clone with one commit on master."""
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path)}
    bare, work = tmp_path / "linux.git", tmp_path / "work"
    git("init", "--bare", "--initial-branch=master", str(bare), cwd=tmp_path, env=env)
    shutil.copy(HOOK, bare / "hooks" / "post-receive")
    git("clone", str(bare), str(work), cwd=tmp_path, env=env)
    (work / "rcu.c").write_text("void synchronize_rcu(void) {}\n")
    git("add", "rcu.c", cwd=work, env=env)
    git("commit", "-m", "rcu: first", cwd=work, env=env)
    return bare, work, env


@pytest.mark.skipif(not (shutil.which("openssl") and shutil.which("curl")), reason="openssl, curl")
def test_post_receive_reports_the_push(live_server, transactional_db, repos):
    hooked = Hooked()
    hooked.policy.coalesce_seconds = 3600  # tested later by the beat: no worker needed here
    hooked.policy.save()
    bare, work, env = repos
    # Configured through git config of the bare repository, as on a gitolite server.
    git("config", "rcubench.url", live_server.url, cwd=bare, env=env)
    git("config", "rcubench.tree", hooked.tree.name, cwd=bare, env=env)
    git("config", "rcubench.secret", hooked.secret, cwd=bare, env=env)

    pushed = git("push", "origin", "master", cwd=work, env=env)
    head = git("rev-parse", "HEAD", cwd=work, env=env).stdout.strip()
    assert "rcubench: refs/heads/master" in pushed.stderr, pushed.stderr
    push = Push.objects.get()
    assert (push.tree, push.branch, push.before, push.after, push.source) == (
        hooked.tree,
        "master",
        "0" * 40,
        head,
        "git",
    )
    assert Delivery.objects.get().push == push


def test_post_receive_exits_0_when_rcubench_is_unreachable(closed_port, repos):
    bare, work, env = repos
    env = {
        **env,
        "RCUBENCH_URL": f"http://127.0.0.1:{closed_port}",
        "RCUBENCH_TREE": "linux",
        "RCUBENCH_SECRET": "s3cret",
        "RCUBENCH_TIMEOUT": "5",
    }
    pushed = git("push", "origin", "master", cwd=work, env=env)  # check=True: the push worked
    assert "rcubench: warning" in pushed.stderr
    assert "unreachable" in pushed.stderr
    assert git("rev-parse", "master", cwd=bare, env=env).stdout.strip()


def test_post_receive_unconfigured_warns_and_exits_0(repos):
    _bare, work, env = repos
    pushed = git("push", "origin", "master", cwd=work, env=env)
    assert "not configured" in pushed.stderr
