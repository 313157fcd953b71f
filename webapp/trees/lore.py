"""A patch series from lore.kernel.org by message-id, for the front ends (the web form).

The fetch itself is the engine's (`engine.build.lore.fetch_series`: `b4 am` in a throwaway
directory with its own HOME, with a timeout); this names the failure as the form shows it,
"could not fetch <msgid> from lore: <reason>", and logs it. Where the network does not reach
lore (this machine), b4 fails within a second on the name lookup.
"""

from engine.build.lore import LoreError, fetch_series, validate_message_id
from webapp import logs

log = logs.get(__name__)
# A request waits for b4 this long at most; a series thread usually comes in seconds.
FETCH_TIMEOUT = 60.0


class LoreFetchError(ValueError):
    """The series could not be had: a malformed message-id, lore unreachable, not found."""


def fetch(message_id: str, *, timeout: float = FETCH_TIMEOUT) -> bytes:
    """The am-ready mbox of the series `message_id` belongs to, or LoreFetchError."""
    try:
        bare = validate_message_id(message_id)
    except LoreError as exc:
        raise LoreFetchError(str(exc)) from None
    try:
        mbox = fetch_series(bare, timeout=timeout)
    except LoreError as exc:
        reason = str(exc).removeprefix(f"cannot fetch <{bare}> with b4: ")
        log.info("lore fetch failed", message_id=bare, reason=reason)
        raise LoreFetchError(f"could not fetch <{bare}> from lore: {reason}") from None
    log.info("lore series fetched", message_id=bare, bytes=len(mbox))
    return mbox
