"""Which git URLs rcubench will fetch from.

Tree URLs reach `git fetch`, which honours transports that run commands (`ext::`) or read
the worker's own disk (`file://`, bare paths). Only network transports are accepted from
user input; local paths only when an operator registers the tree.
"""

import re
from urllib.parse import urlsplit

NETWORK_SCHEMES = ("https", "git", "ssh")
# scp-like ssh syntax: user@host:path (no scheme, the colon before any slash).
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)[^\s]+$")


class UnsafeSourceError(ValueError):
    """A tree URL that rcubench refuses to fetch; the message names the reason."""


def validate_tree_url(url: str, *, allow_local: bool = False) -> str:
    """Return `url` if rcubench may fetch it, else raise UnsafeSourceError saying why.

    `allow_local` admits absolute local paths, for trees an operator registered.
    """
    if not url or url != url.strip():
        raise UnsafeSourceError("tree URL is empty or has surrounding white space")
    if url.startswith("-"):
        raise UnsafeSourceError(f"tree URL {url!r} starts with '-' (would be read as an option)")
    if "::" in url.split("/", 1)[0]:
        raise UnsafeSourceError(f"tree URL {url!r} uses a git remote helper (such as ext::)")
    if any(ch in url for ch in "\0\n\r\t") or " " in url:
        raise UnsafeSourceError(f"tree URL {url!r} contains white space or control characters")
    if url.startswith("/"):
        if not allow_local:
            raise UnsafeSourceError(
                f"tree URL {url!r} is a local path; only an operator can register one"
            )
        return url
    if _SCP_LIKE.match(url):
        return url
    parts = urlsplit(url)
    if parts.scheme not in NETWORK_SCHEMES:
        shown = parts.scheme or "(none)"
        raise UnsafeSourceError(
            f"tree URL {url!r} has scheme {shown}; allowed: "
            + ", ".join(f"{s}://" for s in NETWORK_SCHEMES)
        )
    if not parts.hostname:
        raise UnsafeSourceError(f"tree URL {url!r} has no host")
    return url
