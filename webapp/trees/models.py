"""Where kernels come from: git trees, patch series, resolved revisions, and builds."""

from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from engine.build import outcomes
from engine.build.sources import UnsafeSourceError, validate_tree_url
from webapp.states import (
    Arch,
    TrackedStep,
    error_code_iff_unsuccessful,
    result_only_when_done,
)
from webapp.trees import names

sha_validator = RegexValidator(r"^[0-9a-f]{40}$", "a full 40-digit lowercase hex git sha")
sha256_validator = RegexValidator(r"^[0-9a-f]{64}$", "a 64-digit lowercase hex SHA-256")


def validate_registered_tree_url(url: str) -> None:
    # Trees are registered by operators (admin), who may name local mirrors.
    try:
        validate_tree_url(url, allow_local=True)
    except UnsafeSourceError as exc:
        raise ValidationError(str(exc)) from exc


def shown_url(url: str) -> str:
    """`url` as pages show it: a user name and password in it (a token for a private
    remote, `https://user:token@host/...`) replaced by `***`. An scp-like `git@host:path`
    has no userinfo part and names no secret: it is shown as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL urlsplit can read: hide whatever precedes an "@"
        return "***" + url[url.rfind("@") :] if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


class MailCommandsFrom(models.TextChoices):
    """Whose reply commands (docs/alerts.md, "Reply commands") a tree takes, by From:."""

    MEMBERS = "members", "its members, the series' authors and the pusher"
    RECIPIENTS = "recipients", "also every address the answered mail was sent to"


class Tree(models.Model):
    """A git tree kernels are built from. Its webhook secrets are a WebhookEndpoint (made by
    `./manage.py webhook_secret`); what a push tests, and against which baseline, is its
    WatchPolicy."""

    MailCommandsFrom = MailCommandsFrom

    name = models.CharField(
        max_length=names.MAX_LENGTH, unique=True, validators=[names.validate_tree_name],
        help_text=names.HELP,
    )  # fmt: skip
    url = models.CharField(max_length=500, validators=[validate_registered_tree_url])
    description = models.TextField(blank=True)
    public = models.BooleanField(
        default=True,
        help_text="New comparisons on this tree are public (else restricted to its members, "
        "e.g. for embargoed fixes).",
    )
    mail_commands_from = models.CharField(
        max_length=16, choices=MailCommandsFrom, default=MailCommandsFrom.MEMBERS,
        help_text="Whose mail commands (#rcubench lines in a reply to rcubench's mail) are "
        "acted on, by their From address: the tree's members (their account's address), the "
        "series' authors and the pusher; or also every address the answered mail was sent "
        "to (a subscribed list's readers write from their own address, not the list's).",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # The one rule (names.py), for code that creates trees without the admin's checks.
            models.CheckConstraint(
                condition=models.Q(name__regex=names.SQL_REGEX),
                name="tree_name_rule",
                violation_error_message=names.MESSAGE,
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def shown_url(self) -> str:
        """The URL without credentials (shown_url): what pages show."""
        return shown_url(self.url)


class TreeMembership(models.Model):
    """A user's role on a tree: admins edit the tree and its watch policy and cancel any of
    its comparisons; submitters may submit against it. Members of a tree see its restricted
    comparisons; staff manage trees, targets and users (admin site)."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Tree admin"
        SUBMITTER = "submitter", "Submitter"

    tree = models.ForeignKey(Tree, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role, default=Role.SUBMITTER)

    class Meta:
        ordering = ["tree", "user"]
        constraints = [
            models.UniqueConstraint(fields=["tree", "user"], name="membership_one_per_tree"),
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.tree} ({self.role})"


class PatchSeries(models.Model):
    """A patch series as posted (git format-patch / send-email mbox)."""

    message_id = models.CharField(
        max_length=998, blank=True, help_text="Message-Id of the cover letter or first patch."
    )
    subject = models.CharField(max_length=998)
    author = models.CharField(max_length=500, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    mbox = models.BinaryField(help_text="The mbox exactly as received.")
    mbox_sha256 = models.CharField(max_length=64, unique=True, validators=[sha256_validator])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "patch series"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["message_id"])]

    def __str__(self) -> str:
        return self.subject


class Patch(models.Model):
    series = models.ForeignKey(PatchSeries, on_delete=models.CASCADE, related_name="patches")
    index = models.PositiveSmallIntegerField(help_text="1-based position in the series.")
    subject = models.CharField(max_length=998)
    author = models.CharField(max_length=500, blank=True)
    message_id = models.CharField(max_length=998, blank=True)

    class Meta:
        verbose_name_plural = "patches"
        ordering = ["series", "index"]
        constraints = [
            models.UniqueConstraint(fields=["series", "index"], name="patch_unique_index"),
            models.CheckConstraint(condition=models.Q(index__gte=1), name="patch_index_1_based"),
        ]

    def __str__(self) -> str:
        return f"[{self.index}/{self.series.patches.count()}] {self.subject}"


class Revision(models.Model):
    """A ref of a tree resolved to a sha, optionally with a patch series applied on top."""

    tree = models.ForeignKey(Tree, on_delete=models.PROTECT, related_name="revisions")
    ref = models.CharField(max_length=255, help_text="The ref as requested (branch, tag, sha...).")
    base_sha = models.CharField(
        max_length=40, blank=True, validators=[sha_validator], help_text="Resolved by the build."
    )
    series = models.ForeignKey(
        PatchSeries, null=True, blank=True, on_delete=models.PROTECT, related_name="revisions"
    )
    patch_fallback = models.BooleanField(
        default=False,
        help_text="If plain `git am` fails, retry with `git am -3`, then with fuzz (patch -F3).",
    )
    applied_with = models.CharField(
        max_length=32, blank=True, help_text="How the series applied: git am, git am -3 or fuzz."
    )
    apply_notes = models.TextField(blank=True)
    sha = models.CharField(
        max_length=40,
        blank=True,
        validators=[sha_validator],
        help_text="Resulting commit: base_sha, or the tip after the series applied.",
    )
    # Recorded where the ref is resolved (at submission where the tree can be read here,
    # and by the build), so that pages and mail name the kernel without asking git.
    subject = models.CharField(
        max_length=998, blank=True, help_text="The subject line of base_sha's commit."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        label = f"{self.tree}:{self.ref} ({self.base_sha[:12]})"
        return f"{label} + {self.series}" if self.series_id else label


class Build(TrackedStep):
    """One revision built for one arch and config.

    The artifact is stored under its cache key (sha, arch, config hash, toolchain) by the
    build engine, which builds each key once: two revisions naming one commit share the
    artifact, and the later build is recorded as `cached` (make did not run).
    """

    class Error(models.TextChoices):
        # The build engine's codes (engine/build/outcomes.py), one vocabulary for both.
        NONE = "", "(none)"
        FETCH_FAILED = outcomes.FETCH_FAILED
        BAD_REF = outcomes.BAD_REF
        PATCH_FAILED = outcomes.PATCH_FAILED
        CONFIG_DROPPED = outcomes.CONFIG_DROPPED
        MAKE_FAILED = outcomes.MAKE_FAILED
        TIMEOUT = outcomes.TIMEOUT
        NO_SPACE = outcomes.NO_SPACE
        INFRA = outcomes.INFRA

    revision = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="builds")
    arch = models.CharField(max_length=16, choices=Arch)
    kconfig = models.TextField(
        blank=True, help_text="Kconfig lines the benchmarks asked for, on top of the arch base."
    )
    config_hash = models.CharField(max_length=64, validators=[sha256_validator])
    sha = models.CharField(max_length=40, blank=True, validators=[sha_validator])
    toolchain = models.CharField(max_length=200, blank=True, help_text="Compiler and linker.")
    artifact_key = models.CharField(max_length=64, blank=True, db_index=True)
    cached = models.BooleanField(default=False, help_text="Served from the artifact store.")
    error_code = models.CharField(max_length=32, choices=Error, default=Error.NONE, blank=True)
    log = models.TextField(blank=True)
    artifact_dir = models.CharField(max_length=500, blank=True)
    # What a runner on another host fetches by artifact_key, and checks before booting it
    # (engine/build/artifacts.py): the database, not the serving host, vouches for it.
    image_name = models.CharField(max_length=64, blank=True)
    image_sha256 = models.CharField(max_length=64, blank=True)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "arch", "config_hash"], name="build_unique_request"
            ),
            result_only_when_done("build_result_only_when_done"),
            error_code_iff_unsuccessful("build_error_code_iff_unsuccessful"),
        ]
        indexes = [
            models.Index(fields=["sha", "arch", "config_hash", "toolchain"], name="build_cache_key")
        ]

    def __str__(self) -> str:
        return f"{self.sha[:12] or self.revision.ref} {self.arch} {self.config_hash[:8]}"
