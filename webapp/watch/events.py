"""A push as every front end hands it over (GitHub, GitLab and generic webhooks, polling):
names and shas, not database rows."""

import re
from dataclasses import dataclass

ZERO_SHA = "0" * 40
_SHA = re.compile(r"^[0-9a-f]{40}$")
_PREFIXES = ("refs/heads/", "refs/tags/")


class BadPush(ValueError):
    """A push event that names no valid ref or sha (the sender's fault: 400)."""


@dataclass(frozen=True)
class PushEvent:
    ref: str  # the full ref: refs/heads/<branch> or refs/tags/<tag>
    before: str  # 40 hex; all zeros when the ref was created
    after: str  # 40 hex; all zeros when the ref was deleted
    source: str  # a Push.Source value
    forced: bool = False  # the sender says so (GitHub's `forced`); else found from history
    # The pusher's address where the payload names one (GitHub's pusher.email, GitLab's
    # user_email): a webhook comparison's regression is mailed to them (docs/alerts.md).
    pusher_email: str = ""

    def __post_init__(self) -> None:
        for name in ("before", "after"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _SHA.match(value):
                raise BadPush(f"{name} must be a 40-digit lowercase hex sha, got {value!r:.60}")
        if not isinstance(self.ref, str) or not self.ref.startswith(_PREFIXES):
            raise BadPush(f"ref must be refs/heads/<branch> or refs/tags/<tag>: {self.ref!r:.80}")
        name = self.name
        if not isinstance(self.pusher_email, str) or len(self.pusher_email) > 254:
            raise BadPush("pusher_email must be an address of at most 254 characters")
        odd = any(c.isspace() or ord(c) < 32 for c in name)
        if not name or len(self.ref) > 255 or odd or ".." in name:
            raise BadPush(f"not a valid ref name: {self.ref!r:.80}")

    @property
    def is_tag(self) -> bool:
        return self.ref.startswith("refs/tags/")

    @property
    def name(self) -> str:
        """The branch or tag name."""
        return self.ref.split("/", 2)[2] if self.ref.count("/") >= 2 else ""

    @property
    def deleted(self) -> bool:
        return self.after == ZERO_SHA
