"""URL converters shared by the apps' URL patterns."""

from django.urls import register_converter


class TreeNameConverter:
    """A tree's name in a URL: a slug, and dots too (`linux-6.12`, the default tree, is
    named after its version, which a slug would not allow)."""

    regex = r"[-a-zA-Z0-9_.]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TreeNameConverter, "tree")
