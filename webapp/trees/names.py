"""A tree's name: one rule for the model (and its database constraint), the admin's forms,
the URLs (webapp/converters.py), the API and the commands.

Letters, digits, `-`, `_` and `.`, because kernel trees are named after versions
(`linux-6.12`, the default tree), starting with a letter or a digit: never `.` or `..`
(a URL path segment that browsers resolve away) nor `-rf` (read as an option where a name
is a command-line argument, as in the reproducer's `./manage.py compare --tree NAME`)."""

import re

from django.core.validators import RegexValidator

MAX_LENGTH = 64
# Without anchors: the URL converter's regex, which Django anchors itself.
PATTERN = r"[A-Za-z0-9][-A-Za-z0-9_.]*"
# For the database's CHECK (PostgreSQL's `~`, where `$` is the end of the string).
SQL_REGEX = rf"^{PATTERN}$"
HELP = "Letters, digits, '-', '_' and '.', starting with a letter or digit (e.g. linux-6.12)."
MESSAGE = "Enter a valid tree name: " + HELP[0].lower() + HELP[1:]

validate_tree_name = RegexValidator(rf"\A{PATTERN}\Z", MESSAGE)


def name_from(text: str) -> str:
    """A name under the rule made from `text` (a repository's directory name): each run of
    other characters becomes one `-`, and what may not start or end a name is dropped;
    "tree" when nothing is left."""
    name = re.sub(r"[^-A-Za-z0-9_.]+", "-", text)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:MAX_LENGTH].rstrip("-_.")
    return name or "tree"
