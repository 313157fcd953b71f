#!/usr/bin/env python3
"""Django's command-line entry point for rcubench."""

import os
import sys


def remote_client(argv: list[str]) -> bool:
    """Whether the command line is `compare --server URL ...`: a client of another
    rcubench's REST API, which needs no settings of this machine (webapp/settings.py)."""
    return argv[1:2] == ["compare"] and any(
        a == "--server" or a.startswith("--server=") for a in argv[2:]
    )


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    if remote_client(sys.argv):
        os.environ["RCUBENCH_REMOTE_CLIENT"] = "1"
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
