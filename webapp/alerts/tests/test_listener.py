"""The LMTP listener and the maildir reader, for real: aiosmtpd's LMTP server on loopback
fed by smtplib.LMTP (what an MTA's lmtp transport speaks), and a maildir on disk."""

import smtplib
import socket
from pathlib import Path

import pytest

from webapp.alerts import listener
from webapp.alerts.models import InboundMail

FIXTURES = Path(__file__).with_name("fixtures") / "inbound"
pytestmark = pytest.mark.django_db(transaction=True)  # the listener's thread commits


@pytest.fixture
def lmtp():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    controller = listener.start_lmtp("127.0.0.1", port)
    try:
        yield port
    finally:
        controller.stop()


def _send(port: int, raw: bytes) -> dict:
    with smtplib.LMTP("127.0.0.1", port) as client:
        return client.sendmail("jane.dev@dev.example.org", ["bench@bench.example.org"], raw)


def test_a_delivered_mail_is_stored_once(lmtp):
    raw = (FIXTURES / "ack.eml").read_bytes()
    assert _send(lmtp, raw) == {}  # 250 for the one recipient
    assert _send(lmtp, raw) == {}  # the MTA's retry: taken, not stored again
    [row] = InboundMail.objects.all()
    assert (row.message_id, row.state, bytes(row.raw)) == (
        "<awoxT2vmeMnx396B@dev.example.org>", "received", raw,
    )  # fmt: skip


def test_an_oversized_mail_is_refused_for_the_mta_to_bounce(lmtp):
    raw = (FIXTURES / "ack.eml").read_bytes() + (b"x" * 76 + b"\r\n") * 30_000  # 2.3 MB
    with pytest.raises(smtplib.SMTPSenderRefused) as refused:  # at MAIL FROM's SIZE=
        _send(lmtp, raw)
    assert refused.value.smtp_code == 552
    assert not InboundMail.objects.exists()


def test_a_maildir_is_read_and_its_messages_moved(tmp_path):
    for sub in ("new", "cur", "tmp"):
        (tmp_path / sub).mkdir()
    (tmp_path / "new" / "1.host").write_bytes((FIXTURES / "fix.eml").read_bytes())
    (tmp_path / "new" / "2.host").write_bytes(b"x" * (2 * 1024 * 1024 + 1))
    assert listener.read_maildir(tmp_path) == 2
    assert sorted(p.name for p in (tmp_path / "cur").iterdir()) == ["1.host:2,S", "2.host:2,T"]
    assert InboundMail.objects.get().message_id == "<awoxWRy1RcL_UYjX@dev.example.org>"
