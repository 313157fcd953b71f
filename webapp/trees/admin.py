"""Trees and what they hold. Roles on a tree (memberships) are granted from either side:
the tree's page, the user's page (webapp/accounts/admin.py) or a list of their own."""

from django.contrib import admin

from webapp.trees.models import Build, Patch, PatchSeries, Revision, Tree, TreeMembership


class MembershipInline(admin.TabularInline):
    model = TreeMembership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Tree)
class TreeAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "public", "mail_commands_from", "created_at"]
    list_filter = ["public", "mail_commands_from"]
    search_fields = ["name", "url", "description"]
    inlines = [MembershipInline]
    # Where what is not on this form is set, for an operator who looks for it here.
    fieldsets = [
        (None, {
            "fields": ["name", "url", "description", "public", "mail_commands_from"],
            "description": "Webhook secrets are made with <code>./manage.py webhook_secret "
            "NAME</code> (docs/webhooks.md); what a push tests, and against which baseline "
            "(its branch's previous tested head), is the tree's watch policy.",
        }),
    ]  # fmt: skip


@admin.register(TreeMembership)
class TreeMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tree", "role"]
    list_filter = ["role", "tree"]
    search_fields = ["user__username", "user__email", "tree__name"]
    list_select_related = ["user", "tree"]
    autocomplete_fields = ["user", "tree"]


class PatchInline(admin.TabularInline):
    model = Patch
    extra = 0
    fields = readonly_fields = (
        "index",
        "subject",
        "author",
        "message_id",
    )
    can_delete = False


@admin.register(PatchSeries)
class PatchSeriesAdmin(admin.ModelAdmin):
    list_display = ["subject", "author", "message_id", "patch_count", "created_at"]
    search_fields = ["subject", "author", "message_id", "patches__subject"]
    readonly_fields = ["mbox_sha256", "created_at"]
    exclude = ["mbox"]
    inlines = [PatchInline]

    @admin.display(description="patches")
    def patch_count(self, obj: PatchSeries) -> int:
        return obj.patches.count()


@admin.register(Revision)
class RevisionAdmin(admin.ModelAdmin):
    list_display = ["tree", "ref", "base_sha", "series", "applied_with", "sha", "created_at"]
    list_filter = ["tree"]
    search_fields = ["ref", "base_sha", "sha", "series__subject"]
    list_select_related = ["tree", "series"]
    raw_id_fields = ["series"]


@admin.register(Build)
class BuildAdmin(admin.ModelAdmin):
    list_display = [
        "short_sha",
        "revision",
        "arch",
        "state",
        "result",
        "error_code",
        "cached",
        "seconds",
        "host",
        "created_at",
    ]
    list_filter = ["state", "result", "error_code", "arch", "cached"]
    search_fields = ["sha", "config_hash", "artifact_key", "toolchain", "host", "revision__ref"]
    list_select_related = ["revision__tree"]
    raw_id_fields = ["revision"]
    readonly_fields = [
        "created_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "artifact_key",
        "artifact_dir",
        "cached",
    ]

    @admin.display(description="sha", ordering="sha")
    def short_sha(self, obj: Build) -> str:
        return obj.sha[:12]
