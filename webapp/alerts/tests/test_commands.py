"""Reply commands by mail (webapp.alerts.commands) against real mails: mutt and git
send-email sent them to an SMTP sink (fixtures/inbound/README.md), plus variations made
by editing those bytes. No database."""

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webapp.alerts.commands import Command, parse

INBOUND = Path(__file__).parent / "fixtures" / "inbound"
ALERT = "<rcubench.c17.5d41402abc4b2a76@bench.example.org>"
COVER = "<20261120093000.4711-1-jane.dev@dev.example.org>"
SUBJECT = "Re: [PATCH 0/4] rcu: wait longer before the first FQS scan"
PATCH_NAME = "0001-rcu-restore-the-first-FQS-wait.patch"
DIFF = """\
diff --git a/kernel/rcu/tree.c b/kernel/rcu/tree.c
index f16344d..a296d98 100644
--- a/kernel/rcu/tree.c
+++ b/kernel/rcu/tree.c
@@ -7,7 +7,7 @@ static noinline_for_stack void rcu_gp_fqs_loop(void)
 \tunsigned long j;
 \tstruct rcu_node *rnp = rcu_get_root();
\x20
-\tj = READ_ONCE(jiffies_till_first_fqs) + 1;
+\tj = READ_ONCE(jiffies_till_first_fqs);
 \tif (rcu_state.cbovld)
 \t\tgf = RCU_GP_FLAG_OVLD;
 \tret = 0;
"""
MESSAGE = """\
The extra jiffy before the first force-quiescent-state scan made every
synchronize_rcu() about one jiffy slower on an idle system (rcubench
comparison 17). Drop it again.

Signed-off-by: Jane Developer <jane.dev@dev.example.org>
---
 kernel/rcu/tree.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

"""
FORMAT_PATCH = f"""\
From 1244d943d078a8726a0115e8b218c4a594e3f3f6 Mon Sep 17 00:00:00 2001
From: Jane Developer <jane.dev@dev.example.org>
Date: Tue, 24 Nov 2026 11:00:00 +0000
Subject: [PATCH] rcu: restore the first FQS wait

{MESSAGE}{DIFF}--\x20
2.39.5

"""


def raw(name: str) -> bytes:
    return (INBOUND / name).read_bytes()


def edited(name: str, old: bytes, new: bytes) -> bytes:
    data = raw(name)
    assert data.count(old) == 1, old
    return data.replace(old, new)


def ack_with(line: bytes):
    """ack.eml with its command line (body line 22) replaced."""
    return parse(edited("ack.eml", b"#rcubench ack\r\n", line + b"\r\n"))


# --- the captured mails --------------------------------------------------------------------


def test_ack_below_a_quoted_alert():
    m = parse(raw("ack.eml"))
    assert m.message_id == "<awoxT2vmeMnx396B@dev.example.org>"
    assert m.in_reply_to == [ALERT]
    assert m.references == [COVER, ALERT]
    assert m.parents == [ALERT, COVER]
    assert m.sender == "Jane.Dev@dev.example.org"
    assert m.reply_to == "Jane.Dev@dev.example.org"
    assert m.subject == SUBJECT
    assert m.commands == (Command("ack", "", None, 22, "#rcubench ack"),)
    assert (m.patch, m.patch_source, m.problems, m.notes, m.automatic) == (None, "", (), (), False)


def test_invalid_quoted_printable_utf8_with_reply_to_and_signature():
    m = parse(raw("invalid.eml"))
    why = "the target was thermally throttled during run 3 (CPU0 at 98\u00b0C, clock capped)"
    assert m.commands == (Command("invalid", why, None, 11, f"#rcubench invalid: {why}"),)
    assert m.sender == "joerg@tester.example.org"
    assert m.reply_to == "joerg+rcubench@tester.example.org"
    assert (m.problems, m.notes) == ((), ())


def test_fix_by_subject_on_an_indented_line():
    m = parse(raw("fix.eml"))
    subject = "rcu: restore the first FQS wait"
    assert m.commands == (Command("fix", subject, None, 8, f"#rcubench fix: {subject}"),)
    assert m.commands[0].sha == ""
    assert m.problems == ()


def test_fix_by_sha_is_recorded_as_a_sha():
    m = parse(edited("fix.eml", b"rcu: restore the first FQS wait", b"1244D943d078"))
    assert m.commands == (Command("fix", "1244d943d078", None, 8, "#rcubench fix: 1244D943d078"),)
    assert m.commands[0].sha == "1244d943d078"


def test_dup_gets_its_angle_brackets():
    m = parse(raw("dup.eml"))
    mid = "rcubench.c12.9a8b7c6d5e4f3a2b@bench.example.org"
    assert m.commands == (Command("dup", f"<{mid}>", None, 8, f"#rcubench dup: {mid}"),)
    assert m.problems == ()


def test_rerun_with_runs():
    m = parse(raw("rerun.eml"))
    assert m.commands == (Command("rerun", "", 12, 22, "#rcubench rerun runs=12"),)
    assert m.problems == ()


def test_a_quoted_command_is_no_command():
    m = parse(raw("quoted-only.eml"))
    assert (m.commands, m.problems, m.patch) == ((), (), None)
    assert m.sender == "paul@rcu.example.org"
    assert m.parents == ["<20261124101500.GA2201@dev.example.org>", ALERT, COVER]


def test_test_git_branch():
    m = parse(raw("test-git.eml"))
    line = "#rcubench test git rcu/next-fix"
    assert m.commands == (Command("test-git", "rcu/next-fix", None, 8, line),)
    assert (m.patch, m.problems) == (None, ())


def test_test_with_an_attached_patch():
    m = parse(raw("test-attached.eml"))
    assert m.commands == (Command("test", "", None, 8, "#rcubench test"),)
    assert m.patch == FORMAT_PATCH
    assert m.patch_source == f"attachment {PATCH_NAME}"
    assert (m.problems, m.notes) == ((), ())


def test_test_inline_by_git_send_email_keeps_the_commit_message():
    m = parse(raw("test-inline.eml"))
    assert m.commands == (Command("test", "", None, 1, "#rcubench test"),)
    assert m.patch == MESSAGE + DIFF  # to the signature: git's "-- \n2.39.5" is not in it
    assert m.patch_source == "inline"
    assert m.subject == "[PATCH] rcu: restore the first FQS wait"
    assert m.message_id == "<20261128014209.21641-1-jane.dev@dev.example.org>"
    assert (m.parents, m.problems, m.notes) == ([ALERT], (), ())


def test_test_inline_pasted_in_mutt():
    m = parse(raw("test-inline-mutt.eml"))
    assert m.commands == (Command("test", "", None, 3, "#rcubench test"),)
    assert (m.patch, m.patch_source, m.problems) == (DIFF, "inline", ())


def test_a_command_line_in_the_commit_message_is_the_patchs():
    again = b"Drop it again.\r\n"
    m = parse(edited("test-inline.eml", again, again + b"#rcubench bisect\r\n"))
    assert m.commands == (Command("test", "", None, 1, "#rcubench test"),)
    assert m.patch == MESSAGE.replace("again.\n", "again.\n#rcubench bisect\n") + DIFF


def test_an_attached_patch_wins_over_an_inline_one():
    pasted = b"#rcubench test\r\n\r\n" + DIFF.replace("\n", "\r\n").encode()
    m = parse(edited("test-attached.eml", b"#rcubench test\r\n", pasted))
    assert m.commands == (Command("test", "", None, 8, "#rcubench test"),)
    assert m.patch == FORMAT_PATCH
    assert m.patch_source == f"attachment {PATCH_NAME}"
    # Lines 10-22 are the diff; with no signature the inline patch runs to the body's end
    # ("Jane", line 24), which git apply ignores.
    note = f"the inline patch (lines 10-24) is ignored: the attachment {PATCH_NAME} is used"
    assert m.notes == (note,)
    assert m.problems == ()


def test_html_only_is_refused():
    m = parse(raw("html-only.eml"))
    assert m.problems == ("no text/plain part: rcubench reads plain-text mail only",)
    assert (m.commands, m.patch, m.message_id) == ((), None, "<awoxf9OhZoGxKvdU@dev.example.org>")


def test_a_vacation_reply_never_commands():
    m = parse(raw("vacation.eml"))
    assert m.automatic is True
    assert (m.commands, m.problems) == ((), ())
    assert m.notes == (
        "an automatic reply (Auto-Submitted, X-Autoreply or an empty Return-Path): its "
        "commands are not read",
    )
    assert m.subject == "Out of office: " + SUBJECT  # unfolded: mutt folded it


# --- variations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "name", "argument", "runs"),
    [
        ("#RCUBENCH Ack", "ack", "", None),
        ("#rcubench\tbisect", "bisect", "", None),
        ("#rcubench rerun", "rerun", "", None),
        ("#rcubench rerun runs=200", "rerun", "", 200),
        ("#rcubench dup: <a.b@c.example>", "dup", "<a.b@c.example>", None),
        ("#rcubench test git rcu/dev.2026", "test-git", "rcu/dev.2026", None),
        (
            "#rcubench invalid:  A/A run, \tnot a regression ",
            "invalid",
            "A/A run, not a regression",
            None,
        ),
    ],
)
def test_command_forms(line, name, argument, runs):
    m = ack_with(line.encode())
    assert (m.commands, m.problems) == ((Command(name, argument, runs, 22, line.strip()),), ())


def test_leading_blanks_and_a_trailing_cr_are_tolerated():
    m = ack_with(b"  \t#rcubench ack \r")
    assert (m.commands, m.problems) == ((Command("ack", "", None, 22, "#rcubench ack"),), ())


RUNS = "rerun takes runs=N with N from 2 to 200, not"
ENDS = "starts with '-' or '/', or ends with '/', '.' or '.lock'"
URL = "is a URL: rcubench tests the registered tree's branches and fetches no other URL"
DUP = "dup needs the message-id of the mail it duplicates, not"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("#rcubench ackk", "unknown command 'ackk'"),
        ("#rcubench", "no command after #rcubench"),
        ("#rcubench ack thanks", "ack takes no argument, not 'thanks'"),
        ("#rcubench rerun runs=1", f"{RUNS} 'runs=1'"),
        ("#rcubench rerun runs=x", f"{RUNS} 'runs=x'"),
        ("#rcubench rerun runs=201", f"{RUNS} 'runs=201'"),
        ("#rcubench rerun 12", f"{RUNS} '12'"),
        ("#rcubench test", "#rcubench test needs a patch, inline after the command or attached"),
        ("#rcubench test me", "test takes nothing or git <branch>, not 'me'"),
        ("#rcubench test git", "test git needs a branch"),
        ("#rcubench test git rcu/next..fix", "branch 'rcu/next..fix' has '..', '@{' or '//'"),
        ("#rcubench test git rcu@{1}", "branch 'rcu@{1}' has '..', '@{' or '//'"),
        ("#rcubench test git -rcu", f"branch '-rcu' {ENDS}"),
        ("#rcubench test git rcu/", f"branch 'rcu/' {ENDS}"),
        ("#rcubench test git rcu/x.lock", f"branch 'rcu/x.lock' {ENDS}"),
        (
            "#rcubench test git rcu/.x",
            "branch 'rcu/.x' has a component starting with '.' or ending with '.lock'",
        ),
        (
            "#rcubench test git rcu~1",
            "branch 'rcu~1' has a space, a control character or one of ~^:?*[\\",
        ),
        (
            "#rcubench test git rcu dev",
            "branch 'rcu dev' has a space, a control character or one of ~^:?*[\\",
        ),
        (
            "#rcubench test git " + "r" * 201,
            "branch '" + "r" * 79 + "\u2026' is longer than 200 characters",
        ),
        (
            "#rcubench test git https://git.kernel.org/linux.git dev",
            f"'git https://git.kernel.org/linux.git dev' {URL}",
        ),
        (
            "#rcubench test git git@github.com:jd/linux.git",
            f"'git git@github.com:jd/linux.git' {URL}",
        ),
        ("#rcubench dup: <not an id>", f"{DUP} '<not an id>'"),
        ("#rcubench dup: see <a@b.example>", f"{DUP} 'see <a@b.example>'"),
        ("#rcubench dup:", f"{DUP} ''"),
        ("#rcubench invalid:  ", "invalid needs a reason"),
        ("#rcubench invalid: " + "w" * 501, "invalid: a reason of 501 characters, more than 500"),
        ("#rcubench fix:", "fix needs a sha or a subject"),
        ("#rcubench fix: " + "s" * 201, "fix: a sha or a subject of 201 characters, more than 200"),
    ],
)
def test_bad_commands_are_problems_never_commands(line, problem):
    m = ack_with(line.encode())
    assert (m.commands, m.problems) == ((), (f"line 22: {problem}",))


@pytest.mark.parametrize(
    "line", [b"#rcubenchack", b"> #rcubench ack", b"   >> #rcubench ack", b"-- \r\n#rcubench ack"]
)
def test_not_command_lines(line):
    m = ack_with(line)
    assert (m.commands, m.problems) == ((), ())


def test_lf_line_ends_read_the_same():
    m = parse(raw("ack.eml").replace(b"\r\n", b"\n"))
    assert m.commands == (Command("ack", "", None, 22, "#rcubench ack"),)
    assert m.message_id == "<awoxT2vmeMnx396B@dev.example.org>"


def test_several_commands_in_order():
    m = ack_with(b"#rcubench ack\r\n#rcubench bogus\r\n#rcubench rerun runs=5")
    assert m.commands == (
        Command("ack", "", None, 22, "#rcubench ack"),
        Command("rerun", "", 5, 24, "#rcubench rerun runs=5"),
    )
    assert m.problems == ("line 23: unknown command 'bogus'",)


def test_more_than_2_mib_is_refused_before_parsing():
    data = raw("ack.eml") + b"x" * (3 * 1024 * 1024)
    m = parse(data)
    assert m.problems == (f"the mail is {len(data)} bytes, more than the 2097152 rcubench reads",)
    assert (m.commands, m.message_id, m.sender, m.patch) == ((), "", "", None)


def test_a_mail_without_message_id_is_a_problem():
    data = re.sub(rb"Message-ID: [^\r]*\r\n", b"", raw("ack.eml"))
    m = parse(data)
    assert m.message_id == ""
    assert m.problems == ("no Message-ID: rcubench cannot tell this mail from a resent copy",)
    assert len(m.commands) == 1


def test_cr_lf_in_the_subject_never_reaches_a_header():
    data = edited("ack.eml", SUBJECT.encode(), b"=?utf-8?q?Re:_x=0D=0ABcc:_victim@example.org?=")
    assert parse(data).subject == "Re: x Bcc: victim@example.org"


def test_sender_domain_lower_cased_local_part_kept():
    m = parse(edited("ack.eml", b"<Jane.Dev@dev.example.org>", b"<Jane.Dev@Dev.Example.ORG>"))
    assert (m.sender, m.reply_to) == ("Jane.Dev@dev.example.org", "Jane.Dev@dev.example.org")


@pytest.mark.parametrize(
    "from_line", [b"", b"From: Jane Developer\r\n", b"From: a@b.example, c@d.example\r\n"]
)
def test_no_single_from_address_is_a_problem(from_line):
    m = parse(edited("ack.eml", b"From: Jane Developer <Jane.Dev@dev.example.org>\r\n", from_line))
    assert (m.sender, m.reply_to) == ("", "")
    assert m.problems == ("no sender: the From header is missing or not one address",)


@pytest.mark.parametrize(
    ("header", "automatic"),
    [
        (b"Auto-Submitted: auto-generated\r\n", True),
        (b"Auto-Submitted: No\r\n", False),
        (b"X-Autoreply: yes\r\n", True),
        (b"X-Autorespond: yes\r\n", True),
        (b"Return-Path: <>\r\n", True),
        (b"Return-Path: <jane.dev@dev.example.org>\r\n", False),
        (b"Precedence: list\r\n", False),
    ],
)
def test_automatic_mail(header, automatic):
    m = parse(header + raw("ack.eml"))
    assert m.automatic is automatic
    assert len(m.commands) == (0 if automatic else 1)


@pytest.mark.parametrize(
    "display",
    [b"Jane Developer.", b"=?utf-8?q?Jane=0D=0ABcc:?="],  # both made policy.default raise
)
def test_a_malformed_display_name_still_gives_the_address(display):
    m = parse(edited("ack.eml", b"From: Jane Developer <", b"From: " + display + b" <"))
    assert (m.sender, m.problems, len(m.commands)) == ("Jane.Dev@dev.example.org", (), 1)


def test_an_8bit_subject_reads_as_utf8():
    m = parse(edited("ack.eml", b"Subject: Re: [", "Subject: Re: J\u00f6rg [".encode()))
    assert m.subject == "Re: J\u00f6rg [PATCH 0/4] rcu: wait longer before the first FQS scan"


FIXTURE_NAMES = sorted(p.name for p in INBOUND.glob("*.eml"))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(FIXTURE_NAMES), at=st.integers(0, 4000),
       cut=st.integers(0, 40), junk=st.binary(max_size=40))  # fmt: skip
def test_any_mangled_mail_parses_without_error_or_a_line_break_in_a_header(name, at, cut, junk):
    """A real mail with bytes cut out and hostile ones put in (CR, LF, NUL, 8-bit, broken
    encoded words): parse never raises, and no header value it returns carries CR or LF."""
    data = raw(name)
    at = min(at, len(data))
    m = parse(data[:at] + junk + data[at + cut :])
    for value in (m.message_id, m.sender, m.reply_to, m.subject, *m.in_reply_to,
                  *m.references):  # fmt: skip
        assert "\r" not in value, value
        assert "\n" not in value, value
