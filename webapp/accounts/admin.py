"""The user's admin page with their roles on trees (an inline), so that an operator who
makes an account grants its roles on the same page."""

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

from webapp.trees.models import TreeMembership


class TreeRoleInline(admin.TabularInline):
    model = TreeMembership
    extra = 1
    autocomplete_fields = ["tree"]
    verbose_name = "role on a tree"
    verbose_name_plural = "roles on trees"


class UserWithRolesAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, TreeRoleInline]


admin.site.unregister(User)
admin.site.register(User, UserWithRolesAdmin)
