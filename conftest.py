"""Fixtures shared by the whole suite."""

import socket

import pytest


@pytest.fixture
def closed_port() -> int:
    """A localhost TCP port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return port
