"""A password change ends every API token of the account, whichever way the password was
set: the password change page, the admin's form, `manage.py changepassword`, a reset,
set_unusable_password. Django has no signal for it, so a user's save compares the stored
hash with the one being saved. The one new hash that is not a change is the upgrade Django
makes at login when the hasher's defaults moved (check_password's setter saves only the
password, with set_password's raw password already cleared), as Django itself treats it."""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_save

from webapp.accounts import tokens

_CHANGED = "_rcubench_password_changed"


def _note_password_change(sender: Any, instance: Any, raw: bool = False,
                          update_fields: Any = None, **kwargs: Any) -> None:  # fmt: skip
    if raw or instance.pk is None:
        return
    if update_fields is not None and "password" not in update_fields:
        return
    hash_upgrade = update_fields is not None and set(update_fields) == {"password"}
    if hash_upgrade and getattr(instance, "_password", None) is None:
        return
    stored = sender._default_manager.filter(pk=instance.pk).values_list("password", flat=True)
    old = stored.first()
    setattr(instance, _CHANGED, old is not None and old != instance.password)


def _end_tokens(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if getattr(instance, _CHANGED, False):
        setattr(instance, _CHANGED, False)
        tokens.revoke_all(instance, reason="password changed")


def connect() -> None:
    user = get_user_model()
    pre_save.connect(_note_password_change, sender=user, dispatch_uid="rcubench-password-pre")
    post_save.connect(_end_tokens, sender=user, dispatch_uid="rcubench-password-post")
