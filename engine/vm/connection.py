"""Opening libvirt connections, with libvirt's errors as Python exceptions and not stderr noise."""

import libvirt

# libvirt's default handler prints every error to stderr even when the caller handles it.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


class LibvirtUnavailable(RuntimeError):
    """libvirt could not be reached at the given URI; the message says why."""


def open_connection(uri: str, *, read_only: bool = False) -> libvirt.virConnect:
    try:
        conn = libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise LibvirtUnavailable(f"cannot connect to libvirt at {uri}: {exc}") from exc
    if conn is None:  # older bindings return None instead of raising
        raise LibvirtUnavailable(f"cannot connect to libvirt at {uri}")
    return conn


def describe(uri: str) -> str:
    """Connect read-only; return e.g. "libvirt 9.0.0, QEMU driver, 0 domains running".

    Raises LibvirtUnavailable. Uses a cheap driver round trip (numOfDomains): getVersion()
    re-probes every QEMU binary and takes seconds.
    """
    conn = open_connection(uri, read_only=True)
    try:
        lib = _version(conn.getLibVersion())
        return f"libvirt {lib}, {conn.getType()} driver, {conn.numOfDomains()} domains running"
    except libvirt.libvirtError as exc:
        raise LibvirtUnavailable(f"libvirt at {uri} did not answer: {exc}") from exc
    finally:
        conn.close()


def _version(packed: int) -> str:
    return f"{packed // 1_000_000}.{packed // 1000 % 1000}.{packed % 1000}"
