"""URL converters shared by the apps' URL patterns."""

from django.urls import register_converter

from webapp.trees import names


class TreeNameConverter:
    """A tree's name in a URL, by the rule the model keeps (webapp/trees/names.py): dots
    allowed (`linux-6.12`, the default tree, is named after its version)."""

    regex = names.PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TreeNameConverter, "tree")
