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


# --- a bisection's confirmed culprit --------------------------------------------------------

URL = "https://rcubench.example.org"
SHA = "d89cb537e29d" + "4f0c" * 7
CULPRIT = messages.CulpritFacts(
    bisection_id=7, comparison_id=12, benchmark="sync-rcu-latency", metric="writer_duration",
    statistic="p50", unit="%", verdict="regression", effect=9.9, effect_low=8.1,
    effect_high=11.7, position=3, n=4, sha=SHA, subject="rcu: Make synchronize_rcu() faster",
    author="Paul E. McKenney <paulmck@example.org>", message_id="",
    summary='d89cb537e29d ("rcu: Make synchronize_rcu() faster"): confirmed: the re-run '
    "against its parent (CI [+7.12, +10.3] past half the effect (+4.95)) and the revert "
    "from head (CI [-9.9, -6.64] past half the effect (-4.95)).",
    steps=[
        messages.StepFacts(2, "bisect", "like-a", 0.41, -0.62, 1.37, f"{URL}/comparisons/103/"),
        messages.StepFacts(3, "bisect", "like-b", 9.12, 7.8, 10.51, f"{URL}/comparisons/104/"),
        messages.StepFacts(3, "fresh", "like-b", 8.75, 7.12, 10.3, f"{URL}/comparisons/105/"),
        messages.StepFacts(3, "revert", "like-b", -8.31, -9.9, -6.64, f"{URL}/comparisons/106/"),
    ],
    comparison_url=f"{URL}/comparisons/12/",
)  # fmt: skip
LINKS = messages.Links(f"{URL}/bisections/7/", f"{URL}/alerts/unsubscribe/TOKEN/",
                       f"{URL}/accounts/subscriptions/")  # fmt: skip
REASON = "as the author of the commit this bisection found to cause the regression"

SIG = "-- "  # the signature separator, its trailing space included
# The whole mail, as mutt shows it: what a change to culprit_body changes is seen in review.
CULPRIT_BODY = f"""\
rcubench bisected the regression of sync-rcu-latency writer_duration
(p50) in comparison #12, +9.90% [+8.10, +11.70] (B against A, 95% CI),
to one of the 4 commits from A to B, and confirmed it:

  d89cb537e29d ("rcu: Make synchronize_rcu() faster")
  Author: Paul E. McKenney <paulmck@example.org>
  commit {SHA}

d89cb537e29d ("rcu: Make synchronize_rcu() faster"): confirmed: the
re-run against its parent (CI [+7.12, +10.3] past half the effect
(+4.95)) and the revert from head (CI [-9.9, -6.64] past half the effect
(-4.95)).

The steps, each a comparison:

      pos step    answer          shift               95% CI
--------- ------- -------- ------------ --------------------
      2/4 bisect  like A         +0.41%       [-0.62, +1.37]
          {URL}/comparisons/103/
      3/4 bisect  like B         +9.12%      [+7.80, +10.51]
          {URL}/comparisons/104/
      3/4 fresh   like B         +8.75%      [+7.12, +10.30]
          {URL}/comparisons/105/
      3/4 revert  like B         -8.31%       [-9.90, -6.64]
          {URL}/comparisons/106/
pos: the commit (or patch) tested, k of n; bisect: it against A; fresh:
the culprit against its parent, run again; revert: head with the culprit
reverted, against head (like B: it moved back). shift: the step's B
against its A, 95% CI.

The bisection, with every step:
  {URL}/bisections/7/
The comparison it bisected:
  {URL}/comparisons/12/

{SIG}
rcubench, continuous benchmarking of RCU patches. You get this mail as
the author of the commit this bisection found to cause the regression.
To stop all rcubench mail to this address, open this link (or let your
mail client use the List-Unsubscribe header):
  {URL}/alerts/unsubscribe/TOKEN/
Your subscriptions: {URL}/accounts/subscriptions/
"""


def test_the_culprit_mail_names_the_commit_its_effect_and_every_step():
    body = messages.culprit_body(CULPRIT, LINKS, REASON)
    assert body == CULPRIT_BODY
    assert all(len(line) <= 78 or line.strip().startswith("https://")
               for line in body.splitlines())  # fmt: skip


def test_a_culprit_patch_of_a_series_is_linked_on_lore():
    patch = dataclasses.replace(CULPRIT, sha="", subject="rcu: step 3",
                                message_id="<20261120.0001-3-dev@example.org>")  # fmt: skip
    body = messages.culprit_body(patch, LINKS, REASON)
    assert "to one of the series' 4 patches, and confirmed it:" in " ".join(body.split())
    culprit = body.split("\n\n")[1].splitlines()
    assert culprit == [
        '  patch 3/4 ("rcu: step 3")',
        "  Author: Paul E. McKenney <paulmck@example.org>",
        "  https://lore.kernel.org/r/20261120.0001-3-dev@example.org",
    ]
    # A "/" in a message-id is escaped as lore writes it; a malformed id gives no link.
    assert messages.lore_url("<a/b+c@x.org>") == "https://lore.kernel.org/r/a%2Fb+c@x.org"
    unknown = dataclasses.replace(patch, message_id="not an id")
    assert "lore" not in messages.culprit_body(unknown, LINKS, REASON)


def test_a_shift_in_the_metrics_unit_keeps_it():
    assert messages.effect_text(4096.0, 1024.0, 8192.0, "KiB") == "+4096 KiB [+1024, +8192]"
    assert messages.effect_text(None, None, None, "%") == "n/a"
    step = messages.StepFacts(1, "bisect", "skipped", None, None, None, "")
    head, _, row = messages.step_table([step], 4, "%")[:3]
    assert row == "      1/4 bisect  skipped           n/a"
    assert len(row) == head.index("shift") + len("shift")  # right-aligned under its header


def test_the_culprit_mail_threads_under_the_alert_it_follows():
    """Re: the alert's subject (Gmail joins a thread only so), In-Reply-To the alert to the
    same address, References the series' cover letter first."""
    env = dataclasses.replace(
        ENV, subject=messages.reply_subject("Re: [PATCH 0/3] rcu: shrink the expedited GP"),
        message_id="<rcubench.b7.0123456789abcdef@example.org>",
        in_reply_to="<rcubench.c12.fedcba9876543210@example.org>",
        references=["<cover@example.org>", "<rcubench.c12.fedcba9876543210@example.org>"],
    )  # fmt: skip
    msg = messages.email_message(env, messages.culprit_body(CULPRIT, LINKS, REASON))
    assert msg["Subject"] == "Re: [PATCH 0/3] rcu: shrink the expedited GP"
    assert msg["Message-ID"] == "<rcubench.b7.0123456789abcdef@example.org>"
    assert msg["In-Reply-To"] == "<rcubench.c12.fedcba9876543210@example.org>"
    assert msg["References"] == ("<cover@example.org> <rcubench.c12.fedcba9876543210@example.org>")
    assert msg.get_content() == CULPRIT_BODY
