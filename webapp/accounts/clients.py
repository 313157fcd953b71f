"""Which address a request comes from, for django-axes' login lockout (AXES_CLIENT_IP_CALLABLE).

Behind the TLS proxy every request arrives from the proxy's address, so a lockout per (user
name, peer address) would be a lockout per user name that any stranger can trigger. With
RCUBENCH_NUM_PROXIES trusted proxies in front, the client is the X-Forwarded-For entry the
outermost trusted proxy appended: the N-th from the right (each proxy appends the address
it was reached from), as DRF's throttles read it with the same count (NUM_PROXIES). Entries
to its left are whatever the client wrote and are never read. With no proxy configured the
header is ignored: the peer address is the client. An entry that is not an IP address
(a misconfigured proxy, or a client reaching gunicorn directly) counts as the peer."""

import ipaddress

from django.conf import settings
from django.http import HttpRequest

# Longer than any IPv6 address with a zone; a longer header entry is not looked at.
MAX_ADDRESS_LENGTH = 64


def client_address(request: HttpRequest) -> str | None:
    """The client's IP address as the trusted proxies saw it, else the peer's."""
    peer = request.META.get("REMOTE_ADDR")
    proxies = settings.RCUBENCH_NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if not proxies or not forwarded:
        return peer
    entries = forwarded.split(",")
    entry = entries[-min(proxies, len(entries))].strip()
    if len(entry) > MAX_ADDRESS_LENGTH:
        return peer
    try:
        return str(ipaddress.ip_address(entry))
    except ValueError:
        return peer
