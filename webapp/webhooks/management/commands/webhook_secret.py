"""./manage.py webhook_secret <tree> [--rotate]: make a tree's webhook secrets and print
them once, with the endpoint URLs and example configuration. Only the HMAC secret is kept
as is (verifying an HMAC needs it); the GitLab token is kept as its SHA-256, so it cannot
be shown again: lost secrets are replaced with --rotate."""

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from webapp.trees.models import Tree
from webapp.webhooks import services


class Command(BaseCommand):
    help = (
        "Generate a tree's webhook secrets (HMAC secret for GitHub and the generic git hook, "
        "token for GitLab) and print them once with the endpoint URLs."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("tree", help="the tree's name")
        parser.add_argument(
            "--rotate", action="store_true",
            help="replace existing secrets (the old ones stop working at once)",
        )  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        tree = Tree.objects.filter(name=options["tree"]).first()
        if tree is None:
            raise CommandError(f"no tree named {options['tree']!r}")
        try:
            made = services.new_secrets(tree, rotate=options["rotate"])
        except services.Refused as exc:
            raise CommandError(
                f"{exc.detail}: they are shown only when made; use --rotate to replace them"
            ) from exc
        base = settings.RCUBENCH_PUBLIC_URL.rstrip("/")
        url = {
            s: base + reverse(f"webhooks:{s}", args=[tree.name])
            for s in ("github", "gitlab", "git")
        }
        self.stdout.write(
            f"""Webhook secrets of tree {tree.name} (shown once; store them now):

  HMAC secret (GitHub, generic git hook): {made.hmac_secret}
  GitLab secret token:                    {made.gitlab_token}

GitHub: Settings > Webhooks > Add webhook
  Payload URL:  {url["github"]}
  Content type: application/json
  Secret:       the HMAC secret above
  Events:       Just the push event

GitLab: Settings > Webhooks > Add new webhook
  URL:          {url["gitlab"]}
  Secret token: the GitLab secret token above
  Trigger:      Push events (and Tag push events if the watch policy names tags)

Plain git / gitolite: install contrib/post-receive as hooks/post-receive, then
  git config rcubench.url {base}
  git config rcubench.tree {tree.name}
  git config rcubench.secret <the HMAC secret above>
  (endpoint: {url["git"]})

Deliveries: {base}{reverse("deliveries:list", args=[tree.name])}
"""
        )
