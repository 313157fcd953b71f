"""Trees with a watch policy and webhook secrets; payloads in GitHub's and GitLab's
documented push formats; signatures computed here, independently of the code under test."""

import hashlib
import hmac
import json
import time
import uuid

import pytest

from tests.support.factories import TargetFactory, TreeFactory
from webapp.watch.models import WatchPolicy
from webapp.watch.services import process_push
from webapp.watch.tests.test_services import Repo
from webapp.webhooks import services

ZERO = "0" * 40
OLD = "95790bf891e76fee5e1747ab589903ce8a9a5d4b"
NEW = "da1545c1e5e1fbb5b3b0a5ab0fa7b2ccb7e4bd9c"


@pytest.fixture(autouse=True)
def _own_rate_counters(settings):
    """Rate counters of this test only: tree ids repeat across test sessions, and the
    counters live in the shared Redis for a minute."""
    caches = {**settings.CACHES}
    caches["api"] = {**caches["api"], "KEY_PREFIX": f"rcubench-test-{uuid.uuid4().hex}"}
    settings.CACHES = caches


class Hooked:
    """A watched tree (branch master) and its freshly made secrets."""

    def __init__(self, name: str | None = None) -> None:
        self.tree = TreeFactory.create(**({"name": name} if name else {}))
        self.policy = WatchPolicy.objects.create(
            tree=self.tree, branches=["master"], start_ref="v6.12", benchmarks=["sync-rcu-latency"]
        )
        self.policy.targets.add(TargetFactory.create())
        made = services.new_secrets(self.tree)
        self.secret, self.token = made.hmac_secret, made.gitlab_token

    def github_headers(
        self,
        body: bytes,
        event: str = "push",
        delivery: str | None = None,
        secret: str | None = None,
    ) -> dict[str, str]:
        mac = hmac.new((secret or self.secret).encode(), body, hashlib.sha256).hexdigest()
        return {
            "HTTP_X_GITHUB_EVENT": event,
            "HTTP_X_GITHUB_DELIVERY": delivery or str(uuid.uuid4()),
            "HTTP_X_HUB_SIGNATURE_256": f"sha256={mac}",
            "HTTP_USER_AGENT": "GitHub-Hookshot/044aadd",
        }

    def gitlab_headers(
        self, event: str = "Push Hook", token: str | None = None, uuid_: str | None = "auto"
    ) -> dict[str, str]:
        headers = {"HTTP_X_GITLAB_EVENT": event, "HTTP_X_GITLAB_TOKEN": token or self.token}
        if uuid_:
            headers["HTTP_X_GITLAB_EVENT_UUID"] = str(uuid.uuid4()) if uuid_ == "auto" else uuid_
        return headers

    def git_headers(self, body: bytes, ts: int | None = None) -> dict[str, str]:
        stamp = str(int(time.time()) if ts is None else ts)
        mac = hmac.new(self.secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
        return {
            "HTTP_X_RCUBENCH_TIMESTAMP": stamp,
            "HTTP_X_RCUBENCH_SIGNATURE": f"sha256={mac.hexdigest()}",
        }


@pytest.fixture
def hooked(db) -> Hooked:
    return Hooked()


def _user(name: str) -> dict:
    return {"name": name, "email": f"{name}@example.org", "username": name}


def github_push(
    ref: str = "refs/heads/master", before: str = OLD, after: str = NEW, forced: bool = False
) -> bytes:
    """A push event as GitHub documents it (webhook events and payloads, "push")."""
    deleted, created = after == ZERO, before == ZERO
    commit = {
        "id": after,
        "tree_id": "e4b1c5a0d7a3f0e1b2c3d4e5f60718293a4b5c6d",
        "distinct": True,
        "message": "rcu: Make synchronize_rcu() faster",
        "timestamp": "2026-11-24T07:00:00+01:00",
        "url": f"https://github.com/torvalds/linux/commit/{after}",
        "author": _user("paulmck"),
        "committer": _user("paulmck"),
        "added": [],
        "removed": [],
        "modified": ["kernel/rcu/tree.c"],
    }
    owner = {"login": "torvalds", "id": 1024025, "type": "User", "site_admin": False}
    payload = {
        "ref": ref,
        "before": before,
        "after": after,
        "created": created,
        "deleted": deleted,
        "forced": forced,
        "base_ref": None,
        "compare": f"https://github.com/torvalds/linux/compare/{before[:12]}...{after[:12]}",
        "commits": [] if deleted else [commit],
        "head_commit": None if deleted else commit,
        "repository": {
            "id": 2325298,
            "node_id": "MDEwOlJlcG9zaXRvcnkyMzI1Mjk4",
            "name": "linux",
            "full_name": "torvalds/linux",
            "private": False,
            "owner": owner,
            "html_url": "https://github.com/torvalds/linux",
            "default_branch": "master",
            "clone_url": "https://github.com/torvalds/linux.git",
            "pushed_at": 1795510800,
        },
        "pusher": {"name": "paulmck", "email": "paulmck@example.org"},
        "sender": {"login": "paulmck", "id": 4711, "type": "User", "site_admin": False},
    }
    return json.dumps(payload).encode()


def github_ping(hook_id: int = 30) -> bytes:
    return json.dumps(
        {
            "zen": "Keep it logically awesome.",
            "hook_id": hook_id,
            "hook": {
                "type": "Repository",
                "id": hook_id,
                "name": "web",
                "active": True,
                "events": ["push"],
                "config": {
                    "content_type": "json",
                    "insecure_ssl": "0",
                    "url": "https://rcubench.example.org/hooks/github/x/",
                },
            },
            "repository": {"id": 2325298, "full_name": "torvalds/linux"},
            "sender": {"login": "paulmck", "id": 4711},
        }
    ).encode()


def gitlab_push(
    ref: str = "refs/heads/master", before: str = OLD, after: str = NEW, kind: str = "push"
) -> bytes:
    """A Push Hook (or Tag Push Hook, kind "tag_push") as GitLab documents it."""
    project = {
        "id": 15,
        "name": "linux",
        "description": "",
        "web_url": "https://gitlab.example.com/rcu/linux",
        "avatar_url": None,
        "git_ssh_url": "git@gitlab.example.com:rcu/linux.git",
        "git_http_url": "https://gitlab.example.com/rcu/linux.git",
        "namespace": "rcu",
        "visibility_level": 20,
        "path_with_namespace": "rcu/linux",
        "default_branch": "master",
        "homepage": "https://gitlab.example.com/rcu/linux",
        "url": "git@gitlab.example.com:rcu/linux.git",
        "ssh_url": "git@gitlab.example.com:rcu/linux.git",
        "http_url": "https://gitlab.example.com/rcu/linux.git",
    }
    commits = (
        []
        if after == ZERO
        else [
            {
                "id": after,
                "message": "rcu: Make synchronize_rcu() faster\n",
                "title": "rcu: Make synchronize_rcu() faster",
                "timestamp": "2026-11-24T07:00:00+01:00",
                "url": f"https://gitlab.example.com/rcu/linux/-/commit/{after}",
                "author": {"name": "Paul E. McKenney", "email": "paulmck@example.org"},
                "added": [],
                "modified": ["kernel/rcu/tree.c"],
                "removed": [],
            }
        ]
    )
    payload = {
        "object_kind": kind,
        "event_name": kind,
        "before": before,
        "after": after,
        "ref": ref,
        "ref_protected": True,
        "checkout_sha": None if after == ZERO else after,
        "message": None,
        "user_id": 4,
        "user_name": "Paul E. McKenney",
        "user_username": "paulmck",
        "user_email": "",
        "user_avatar": None,
        "project_id": 15,
        "project": project,
        "commits": commits,
        "total_commits_count": len(commits),
        "repository": {
            "name": "linux",
            "url": project["url"],
            "description": "",
            "homepage": project["homepage"],
            "git_http_url": project["git_http_url"],
            "git_ssh_url": project["git_ssh_url"],
            "visibility_level": 20,
        },
    }
    return json.dumps(payload).encode()


HEAD_SUBJECT = "rcu: Make synchronize_rcu() faster"


def pushed_comparison(
    client, root, *, branch: str = "rcu/dev", subject: str = HEAD_SUBJECT, tree: str = "linux-watch"
):
    """A webhook comparison as a real push makes it: a tree (a local bare repository, the
    watch tests' Repo) watched on rcu/*, a commit `subject` pushed to `branch`, GitHub's
    signed push event through /hooks/github/, and the push processed as the control
    worker does (baseline: the start ref v6.12)."""
    repo = Repo(root)
    repo.git("checkout", "--quiet", "-b", branch)
    after = repo.commit(subject)
    repo.git("push", "--quiet", "origin", branch)
    watched = TreeFactory.create(name=tree, url=str(repo.bare))
    policy = WatchPolicy.objects.create(
        tree=watched, branches=["rcu/*"], start_ref="v6.12",
        benchmarks=["sync-rcu-latency"], coalesce_seconds=0, anchor_every=0,
    )  # fmt: skip
    policy.targets.add(TargetFactory.create())
    secret = services.new_secrets(watched).hmac_secret
    body = github_push(ref=f"refs/heads/{branch}", before=ZERO, after=after)
    headers = {
        "HTTP_X_GITHUB_EVENT": "push", "HTTP_X_GITHUB_DELIVERY": str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": f"sha256={services.hmac_hex(secret, body)}",
    }  # fmt: skip
    response = client.post(f"/hooks/github/{tree}/", data=body, content_type="application/json",
                           **headers)  # fmt: skip
    assert response.status_code == 202, response.content
    push = process_push(response.json()["push"])
    assert push.state == "tested", push.reason
    return push.comparisons.get()
