"""A watched tree end to end through real workers: commits pushed to a bare repository on
this machine, whose post-receive hook (contrib/post-receive) calls the generic webhook of
the live server; the push's comparison is built, booted and analysed by real workers, and
the tree's history shows the new head. Two pushes within the coalescing window give one
comparison, of the newest head against the previous tested head.

The second push rewrites the branch to demo/'s patch on the base tag, committed as
rcubench's builder commits a series (the patch's dates, its fixed committer): the same
commit as the session's demo kernel (conftest.x86_demo_kernel), so both sides' kernels are
found by key and the comparison builds none. An empty commit as the head cost a whole
kernel build in a slot of its own (a new tree is a new mirror and slot).
"""

import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.test import Client

from conftest import BASE_TAG, DEFAULT_TREE
from engine.build.git import Checkout
from engine.build.patches import apply_series, parse_mbox
from tests.support.factories import ComparisonFactory, RevisionFactory
from webapp.comparisons.models import Comparison
from webapp.comparisons.tests import conftest as comparison_fixtures
from webapp.trees.models import Tree
from webapp.watch.models import Push, WatchPolicy
from webapp.webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)
# The worker settings, target and demo kernel of the whole-comparison tests.
env = comparison_fixtures.env
x86_target = comparison_fixtures.x86_target
x86_demo_kernel = comparison_fixtures.x86_demo_kernel

HOOK = Path(__file__).resolve().parents[3] / "contrib" / "post-receive"
SECRET = "end-to-end-test-secret"
GIT_ENV = {
    **os.environ, "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.org",
    "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.org",
}  # fmt: skip


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


@pytest.fixture
def served_tree(live_server):
    """A bare repository sharing the default tree's objects, its branch `master` at the
    base tag, with contrib/post-receive installed and pointed at the live server."""
    root = Path(tempfile.mkdtemp(prefix="rcubench-test-push-", dir="/var/tmp"))
    root.chmod(0o755)  # the build user reads the tree
    bare = root / "linux.git"
    _git("clone", "--quiet", "--bare", "--shared", str(DEFAULT_TREE), str(bare), cwd=root)
    _git("update-ref", "refs/heads/master", f"{BASE_TAG}^{{commit}}", cwd=bare)
    _git("symbolic-ref", "HEAD", "refs/heads/master", cwd=bare)
    hook = bare / "hooks" / "post-receive"
    shutil.copy(HOOK, hook)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    for key, value in (("url", live_server.url), ("tree", "linux"), ("secret", SECRET)):
        _git("config", f"rcubench.{key}", value, cwd=bare)
    work = root / "work"
    _git("clone", "--quiet", "--shared", "--no-checkout", str(bare), str(work), cwd=root)
    _git("reset", "--quiet", cwd=work)  # the index at HEAD (no files checked out)
    yield bare, work
    shutil.rmtree(root, ignore_errors=True)


def _push(work: Path, source: str, *, force: bool = False) -> str:
    """`source` pushed to master: what the hook printed."""
    done = subprocess.run(["git", "push", *(["--force"] if force else []), "origin",
                           f"{source}:refs/heads/master"], cwd=work, env=GIT_ENV, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stderr


def _push_commit(work: Path, message: str) -> tuple[str, str]:
    """An empty commit on master, pushed: returns (sha, what the hook printed)."""
    _git("commit", "--quiet", "--allow-empty", "-m", message, cwd=work)
    said = _push(work, "HEAD")
    return _git("rev-parse", "HEAD", cwd=work), said


def _demo_commit(work: Path, base: str) -> str:
    """demo/'s patch applied on `base` by the builder's own code (engine.build.patches): the
    commit a build of base + that series makes. The work tree holds only the file it
    changes. Leaves HEAD and the index at `base`."""
    _git("reset", "--quiet", base, cwd=work)
    _git("checkout", "--", "kernel/rcu/tree.h", cwd=work)
    series = parse_mbox(comparison_fixtures.DEMO_MBOX.read_bytes())
    applied = apply_series(Checkout(work, work / ".git"), series, fallback=False)
    _git("reset", "--quiet", base, cwd=work)
    return applied.sha


def test_pushes_reach_a_comparison_that_runs_and_the_history_shows_the_head(
    celery_processes, env, x86_target, x86_demo_kernel, served_tree
):
    bare, work = served_tree
    tree = Tree.objects.create(name="linux", url=str(bare))
    WebhookEndpoint.objects.create(tree=tree, hmac_secret=SECRET)
    policy = WatchPolicy.objects.create(
        tree=tree, branches=["master"], start_ref=BASE_TAG, benchmarks=["sync-rcu-latency"],
        min_runs=2, max_runs=2, coalesce_seconds=6, anchor_every=0,
    )  # fmt: skip
    policy.targets.add(x86_target)
    # The branch's previous tested head: the base tag's commit, tested and done.
    base = _git("rev-parse", f"{BASE_TAG}^{{commit}}", cwd=bare)
    earlier = ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree, ref=base),
        revision_b=RevisionFactory.create(tree=tree, ref=base),
        state="done", result="ok", verdict="no-meaningful-change",
    )  # fmt: skip
    Push.objects.create(tree=tree, branch="master", before="0" * 40, after=base,
                        source="git", state="tested").comparisons.add(earlier)  # fmt: skip
    demo = _demo_commit(work, base)
    assert demo == x86_demo_kernel.sha  # the session built its kernel
    celery_processes.start_worker(**env)

    first, said = _push_commit(work, "rcu: first step")
    assert "rcubench: refs/heads/master:" in said  # the hook's report of the 202
    # Within the window, the branch is rewritten to the demo commit (a child of the base).
    _push(work, demo, force=True)
    newest = demo
    assert Push.objects.filter(tree=tree, state="pending").count() == 2

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        c = Comparison.objects.filter(pushes__after=newest).first()
        if c is not None and c.state == "done":
            break
        time.sleep(2)
    else:
        pytest.fail(f"no finished comparison of the pushed head\n{celery_processes.logs()}")
    assert (c.result, c.error_code) == ("ok", ""), (c.error_message, celery_processes.logs())
    assert (c.revision_a.ref, c.revision_b.ref) == (base, newest)
    assert c.trigger == "webhook"
    superseded = Push.objects.get(after=first)
    assert superseded.state == "superseded"
    assert superseded.comparisons.count() == 0
    assert Comparison.objects.exclude(pk=earlier.pk).count() == 1  # one comparison for two pushes
    tested = Push.objects.get(after=newest)
    assert "the previous tested head" in tested.baseline_rule

    page = Client().get(f"/trees/{tree.name}/history/")
    assert page.status_code == 200
    html = page.content.decode()
    assert newest[:12] in html
    assert "Plotly.newPlot" in html
