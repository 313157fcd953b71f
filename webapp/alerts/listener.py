"""Where mail commands come in: an LMTP listener for the site's MTA to hand mail to, and a
maildir reader for sites that fetch mail (fetchmail, getmail) into one. Both store each
message with inbound.receive (once per Message-ID) and nothing else; the control worker
reads it (inbound.process).

LMTP, not SMTP: the MTA keeps the queue and retries, and gets a per-recipient answer it
can bounce on (RFC 2033). 250 once stored (or stored before: a second delivery), 552 for a
message over 2 MiB (the MTA bounces it to its sender), 451 when the database did not take
it (the MTA tries again later).
"""

import contextlib
import time
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.lmtp import LMTP
from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections, connection

from webapp import logs
from webapp.alerts import commands, inbound

log = logs.get(__name__)


def _store(raw: bytes) -> str:
    close_old_connections()  # a long-lived listener thread: a connection the server dropped
    try:
        _, created = inbound.receive(raw)
    except inbound.InboundRefused as exc:
        return f"552 5.3.4 {exc}"
    except DatabaseError as exc:
        log.warning("inbound mail not stored", error=str(exc)[:200])
        return "451 4.3.0 not stored, try again later"
    finally:
        connection.close()  # a few mails an hour: no connection held between them
    return "250 2.0.0 stored" if created else "250 2.0.0 stored before"


class Handler:
    """aiosmtpd's handler for the LMTP server: every message is stored, whatever its
    recipients (the MTA's routing decides which mail reaches this listener)."""

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw = bytes(envelope.original_content or b"")
        return await sync_to_async(_store, thread_sensitive=False)(raw)


class LMTPController(Controller):
    """aiosmtpd's threaded controller serving LMTP (its default is SMTP)."""

    def factory(self) -> LMTP:
        return LMTP(self.handler, **self.SMTP_kwargs)


def start_lmtp(host: str, port: int) -> LMTPController:
    # aiosmtpd refuses a larger DATA itself (552), before it is read whole.
    controller = LMTPController(Handler(), hostname=host, port=port,
                                data_size_limit=commands.MAX_BYTES)  # fmt: skip
    controller.start()
    return controller


def read_maildir(path: Path) -> int:
    """Store every message in `path`/new and move it to cur/ (marked seen, or trashed when
    it was refused); returns how many were read. A message the database did not take stays
    in new/ for the next pass."""
    done = 0
    for file in sorted((path / "new").iterdir()):
        answer = _store(file.read_bytes())
        if answer.startswith("451"):
            continue
        flag = "S" if answer.startswith("250") else "T"
        with contextlib.suppress(FileNotFoundError):  # another reader took it
            file.rename(path / "cur" / f"{file.name}:2,{flag}")
            done += 1
        if flag == "T":
            log.info("inbound mail refused", file=file.name, reason=answer)
    return done


def poll_maildir(path: Path, every: float) -> None:
    for sub in ("new", "cur", "tmp"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    while True:
        read_maildir(path)
        time.sleep(every)
