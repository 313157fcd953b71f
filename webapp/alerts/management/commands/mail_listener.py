"""`./manage.py mail_listener`: take mail commands from the MTA by LMTP (default), or read
them from a maildir (--maildir). Thin: webapp/alerts/listener.py."""

import logging
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.alerts import listener


class Command(BaseCommand):
    help = "Receive replies with #rcubench commands: by LMTP on a local port, or a maildir."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--listen", default=settings.RCUBENCH_INBOUND_LMTP,
                            help="the LMTP listener's host:port (%(default)s)")  # fmt: skip
        parser.add_argument("--maildir", type=Path, help="read this maildir's new/ instead")
        parser.add_argument("--every", type=float, default=5.0,
                            help="seconds between maildir passes")  # fmt: skip
        parser.add_argument("--once", action="store_true", help="one maildir pass, then exit")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["maildir"] is not None:
            if opts["once"]:
                self.stdout.write(f"{listener.read_maildir(opts['maildir'])} read")
                return
            listener.poll_maildir(opts["maildir"], opts["every"])
            return
        host, _, port = str(opts["listen"]).rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--listen wants host:port, not {opts['listen']!r}")
        logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd's every command
        controller = listener.start_lmtp(host, int(port))
        self.stdout.write(f"mail_listener: LMTP on {host}:{port}")
        try:
            threading.Event().wait()
        finally:
            controller.stop()
