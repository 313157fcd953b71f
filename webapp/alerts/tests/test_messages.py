"""The message builder without a database: header sanitising and threading headers."""

import dataclasses
from datetime import UTC, datetime

import pytest

from webapp.alerts import messages

ENV = messages.Envelope(
    from_addr="rcubench <rcubench@example.org>", to_addr="dev@example.org",
    subject="Re: x", message_id="<rcubench.c1.abc@example.org>",
    unsubscribe_url="https://r.example.org/alerts/unsubscribe/t/",
    date=datetime(2026, 11, 24, tzinfo=UTC),
)  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\r\nBcc: x@example.org", "a Bcc: x@example.org"),
        ("a\nb\rc\x00d\te", "a b c d e"),
        ("left\u202eright\u2028next", "left right next"),
        ("x" * 300, "x" * 199 + "\u2026"),
    ],
)
def test_header_text_has_no_control_characters(raw, clean):
    assert messages.header_text(raw) == clean


def test_message_ids_keep_only_well_formed_ones():
    assert messages.message_ids("<a@b>\r\nX-Evil: 1", "c@d", "<a@b>", "junk", "<x y@z>") == [
        "<a@b>", "<c@d>",
    ]  # fmt: skip


def test_reply_subject_has_one_re():
    assert messages.reply_subject("Re: RE: [PATCH] rcu: x") == "Re: [PATCH] rcu: x"


def test_the_package_refuses_a_raw_newline_in_a_header():
    """The second line of defence: were header_text ever bypassed, the email package's
    policy refuses the header instead of writing it."""
    from email.message import EmailMessage

    msg = EmailMessage(policy=messages.MAIL_POLICY)
    with pytest.raises(ValueError, match="linefeed or carriage return"):
        msg["Subject"] = "a\r\nBcc: x@example.org"


def test_build_sets_threading_and_unsubscribe_headers():
    env = dataclasses.replace(
        ENV,
        in_reply_to="<cover@example.org>\r\nX: y",
        references=["<cover@example.org>", "<p1@example.org>"],
    )
    msg = messages.email_message(env, "body\n")
    assert msg["In-Reply-To"] == "<cover@example.org>"
    assert msg["References"] == "<cover@example.org> <p1@example.org>"
    assert msg["List-Unsubscribe"] == "<https://r.example.org/alerts/unsubscribe/t/>"
    assert b"\r\nX: y" not in msg.as_bytes()


def test_long_shell_commands_wrap_into_one_pasteable_command():
    import shlex

    cmd = shlex.join(["./manage.py", "compare", "--cmdline-b", "a=1 b='2'", *["--bench", "x"] * 9])
    lines = messages.shell_lines(cmd)
    assert all(len(line) <= 74 for line in lines)
    joined = " ".join(line.rstrip("\\").strip() for line in lines)
    assert shlex.split(joined) == shlex.split(cmd)
