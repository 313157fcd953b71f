"""Mail commands read and acted on (webapp/alerts/inbound.py): real captured replies
(fixtures/inbound/, mutt and git send-email) answering a stored rcubench alert, and the
answers delivered through a real SMTP server on loopback (conftest's smtp)."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.factories import (
    ComparisonFactory,
    MembershipFactory,
    MetricVerdictFactory,
    RevisionFactory,
    TreeFactory,
    UserFactory,
    bisectable_comparison,
)
from webapp.alerts import commands, delivery, inbound
from webapp.alerts.models import Alert, InboundMail
from webapp.comparisons.models import Comparison
from webapp.regressions import services as regressions
from webapp.regressions.models import Regression
from webapp.trees.models import PatchSeries, Revision

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).with_name("fixtures") / "inbound"
ALERT_ID = "<rcubench.c17.5d41402abc4b2a76@bench.example.org>"  # what the fixtures answer
JANE = "jane.dev@dev.example.org"
JANE_AS_SENT = "Jane.Dev@dev.example.org"  # ack.eml's From (mutt lower-cased the domain)


def _raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def reported(smtp):
    """The regression the fixtures answer: its comparison's alert has their In-Reply-To."""
    c = bisectable_comparison(shift=16.7)
    reg = regressions.open_for_comparison(c.pk)
    assert reg is not None
    Alert.objects.create(comparison=c, kind="regression", recipient=JANE, state="sent",
                         subject="Re: [PATCH 0/3] rcu: a series", message_id=ALERT_ID,
                         references="<20261120093000.4711-1-jane.dev@dev.example.org>")  # fmt: skip
    return reg


@pytest.fixture
def jane(reported):
    """Jane's account, a submitter on the regression's tree: the fixtures' sender."""
    user = UserFactory.create(username="jane", email="Jane.Dev@dev.example.org")
    MembershipFactory.create(tree=reported.tree, user=user)
    return user


def _handle(raw: bytes) -> InboundMail:
    row, created = inbound.receive(raw)
    assert created
    inbound.process(row.pk)
    row.refresh_from_db()
    return row


def _answer(smtp, row: InboundMail):
    """The answer's row, delivered through the SMTP server; its message as received."""
    [answer] = row.replies.all()
    assert delivery.deliver(answer.pk) == "sent"
    [got] = smtp.to(answer.recipient)
    return answer, got.message


def test_ack_acknowledges_and_the_answer_is_threaded(reported, jane, smtp):
    row = _handle(_raw("ack.eml"))
    assert row.answers is not None
    assert (row.state, row.answers.message_id, row.sender) == ("done", ALERT_ID, JANE_AS_SENT)
    reported.refresh_from_db()
    assert reported.state == "acknowledged"
    moved = reported.transitions.last()
    assert moved is not None
    assert (moved.via, moved.by, moved.by_address, moved.message_id) == (
        "mail", jane, JANE_AS_SENT, "<awoxT2vmeMnx396B@dev.example.org>",
    )  # fmt: skip
    _, msg = _answer(smtp, row)
    assert msg["In-Reply-To"] == "<awoxT2vmeMnx396B@dev.example.org>"
    assert msg["References"].split() == [
        "<20261120093000.4711-1-jane.dev@dev.example.org>", ALERT_ID,
        "<awoxT2vmeMnx396B@dev.example.org>",
    ]  # fmt: skip
    assert msg["Subject"].startswith("Re: ")
    body = msg.get_content().replace("\r\n", "\n")
    assert "> #rcubench ack\n" in body
    assert f"regression {reported.pk} is acknowledged now (was untriaged): " in body


def test_invalid_fix_and_dup_move_it_with_their_arguments(reported, jane, smtp):
    row = _handle(_raw("fix.eml"))
    reported.refresh_from_db()
    assert reported.state == "fixed"
    assert reported.fixed_by  # the subject the mail gave
    assert reported.fixed_by in row.outcome
    # invalid.eml comes from Jörg: a stranger here, whose mail changes nothing.
    row = _handle(_raw("invalid.eml"))
    assert "Nothing was done: joerg@tester.example.org may not command rcubench" in row.outcome
    reported.refresh_from_db()
    assert reported.state == "fixed"
    answer, _ = _answer(smtp, row)
    assert answer.recipient == "joerg+rcubench@tester.example.org"  # its Reply-To


def test_a_stranger_is_told_and_nothing_moves(reported, smtp):
    row = _handle(_raw("ack.eml"))  # no account with Jane's address, no role
    assert "Nothing was done: Jane.Dev@dev.example.org may not command" in row.outcome
    reported.refresh_from_db()
    assert (reported.state, reported.transitions.count()) == ("untriaged", 1)
    _answer(smtp, row)


def test_the_original_recipients_command_only_where_the_trees_policy_says_so(reported, smtp):
    """Jane got the report (ALERT_ID) but has no account here: refused under the default
    policy (members), which the answer names; acted on under `recipients`."""
    row = _handle(_raw("ack.eml"))
    assert ("Nothing was done: Jane.Dev@dev.example.org may not command rcubench on tree "
            f"{reported.tree.name}: its policy (members) takes mail commands from the "
            "tree's members") in row.outcome  # fmt: skip
    reported.refresh_from_db()
    assert reported.state == "untriaged"
    reported.tree.mail_commands_from = "recipients"
    reported.tree.save(update_fields=["mail_commands_from"])
    _handle(_raw("ack.eml").replace(b"<awoxT2vmeMnx396B@", b"<again@"))
    reported.refresh_from_db()
    assert reported.state == "acknowledged"
    moved = reported.transitions.last()
    assert moved is not None
    assert (moved.by, moved.by_address) == (None, JANE_AS_SENT)


def test_a_stranger_is_refused_under_either_policy(reported, smtp):
    """Jörg got no mail of rcubench's (invalid.eml); Jane's report that the server refused
    does not make her a recipient."""
    reported.tree.mail_commands_from = "recipients"
    reported.tree.save(update_fields=["mail_commands_from"])
    row = _handle(_raw("invalid.eml"))
    assert ("joerg@tester.example.org may not command rcubench on tree "
            f"{reported.tree.name}: its policy (recipients) takes mail commands from the "
            "tree's members (by their account's address), the series' authors and the "
            "pusher, and every address the answered mail was sent to") in row.outcome  # fmt: skip
    Alert.objects.filter(message_id=ALERT_ID).update(state="failed")
    row = _handle(_raw("ack.eml"))
    assert "Nothing was done: Jane.Dev@dev.example.org may not command" in row.outcome
    reported.refresh_from_db()
    assert (reported.state, reported.transitions.count()) == ("untriaged", 1)
    _answer(smtp, row)  # the refusal is answered like any other


def test_a_series_author_may_command_without_an_account(reported, smtp):
    series = reported.comparison.revision_b.series
    series.author = "Jane Developer <jane.dev@dev.example.org>"
    series.save(update_fields=["author"])
    _handle(_raw("ack.eml"))
    reported.refresh_from_db()
    assert reported.state == "acknowledged"


def test_the_same_mail_twice_starts_nothing_twice(reported, jane, smtp, settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True  # rerun.eml asks for 12 a side
    raw = _raw("rerun.eml")
    first, created = inbound.receive(raw)
    again, created_again = inbound.receive(raw)
    assert (created, created_again, again.pk) == (True, False, first.pk)
    inbound.process(first.pk)
    inbound.process(first.pk)  # a redelivered task
    assert Comparison.objects.filter(trigger="mail").count() == 1
    assert Alert.objects.filter(inbound=first).count() == 1


def test_rerun_below_the_minimum_runs_is_refused_with_the_reason(reported, jane):
    row = _handle(_raw("rerun.eml"))
    assert ("> #rcubench rerun runs=12\nrefused: at least 24 runs per side are needed, "
            "got 12") in row.outcome  # fmt: skip
    assert not row.started.exists()


def test_rerun_submits_the_same_comparison_pinned_to_its_commits(reported, jane, smtp, settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True  # rerun.eml asks for 12 a side
    row = _handle(_raw("rerun.eml"))
    c = reported.comparison
    [new] = row.started.all()
    assert (new.trigger, new.min_runs, new.max_runs) == ("mail", 12, max(12, c.max_runs))
    assert new.revision_a.ref == c.revision_a.base_sha
    assert new.revision_b.series is not None
    assert c.revision_b.series is not None
    assert bytes(new.revision_b.series.mbox) == bytes(c.revision_b.series.mbox)
    for field in ("benchmarks", "target_id", "cmdline_a", "cmdline_b", "alpha",
                  "threshold_pct", "visibility"):  # fmt: skip
        assert getattr(new, field) == getattr(c, field), field
    assert f"comparison {new.pk} queued: " in row.outcome
    assert "runs 12-" in row.outcome
    # When it ends, its verdict goes to Jane under the answer.
    answer, _ = _answer(smtp, row)
    Comparison.objects.filter(pk=new.pk).update(state="done", result="ok", verdict="regression")
    [pk] = inbound.answer_ended(new.pk)
    result = Alert.objects.get(pk=pk)
    assert (result.kind, result.recipient, result.in_reply_to) == (
        "result",
        JANE,
        answer.message_id,
    )
    inbound.answer_ended(new.pk)  # the task again: still one row
    assert Alert.objects.filter(kind="result").count() == 1


def test_robots_and_strangers_threads_are_never_answered(reported, jane):
    row = _handle(_raw("vacation.eml"))
    assert (row.state, row.replies.count()) == ("ignored", 0)
    reported.refresh_from_db()
    assert reported.state == "untriaged"
    row = _handle(_raw("quoted-only.eml"))  # a reply to a developer, our alert quoted
    assert (row.state, row.outcome, row.replies.count()) == ("ignored", "no command in it", 0)
    raw = _raw("ack.eml").replace(ALERT_ID.encode(), b"<someone.else@example.org>")
    raw = raw.replace(b"<awoxT2vmeMnx396B", b"<other")
    row = _handle(raw)  # answers no rcubench mail at all
    assert (row.state, row.outcome, row.replies.count()) == (
        "ignored", "it answers no rcubench mail", 0,
    )  # fmt: skip


def test_no_command_and_unknown_ones_are_answered_with_what_was_read(reported, jane, smtp):
    row = _handle(_raw("html-only.eml"))
    assert "not read: no text/plain part: rcubench reads plain-text mail only" in row.outcome
    assert "No command found" in row.outcome


def test_a_dup_of_an_unknown_mail_is_refused(reported, jane):
    row = _handle(_raw("dup.eml"))
    assert "refused: no rcubench regression has a mail with Message-ID" in row.outcome
    reported.refresh_from_db()
    assert reported.state == "untriaged"


def test_a_dup_of_another_regressions_mail(reported, jane):
    other = regressions.open_for_comparison(bisectable_comparison(reported.tree).pk)
    assert other is not None
    wanted = commands.parse(_raw("dup.eml")).commands[0].argument
    Alert.objects.create(comparison=other.comparison, kind="regression", recipient=JANE,
                         subject="x", message_id=wanted, state="sent")  # fmt: skip
    _handle(_raw("dup.eml"))
    reported.refresh_from_db()
    assert (reported.state, reported.duplicate_of) == ("duplicate", other)


def test_oversized_mail_is_refused_before_it_is_stored(reported):
    with pytest.raises(inbound.InboundRefused, match="larger than"):
        inbound.receive(b"X" * (2 * 1024 * 1024 + 1))
    assert not InboundMail.objects.exists()
    assert Regression.objects.get().state == "untriaged"


@pytest.mark.parametrize(("name", "source"), [("test-inline.eml", "inline"),
                                              ("test-attached.eml", "attachment")])  # fmt: skip
def test_test_runs_b_plus_the_patch_against_a_and_against_b(reported, jane, settings, name,
                                                            source):  # fmt: skip
    row = _handle(_raw(name))
    c = reported.comparison
    assert c.revision_b.series is not None
    series = bytes(c.revision_b.series.mbox)
    against_a, against_b = row.started.order_by("pk")
    assert against_a.requested_by.startswith("test: A against B' by mail ")
    assert against_b.requested_by.startswith("test: B against B' by mail ")
    for new in (against_a, against_b):
        assert new.trigger == "mail"
        assert (new.target_id, new.benchmarks, new.min_runs, new.threshold_pct) == (
            c.target_id, c.benchmarks, c.min_runs, c.threshold_pct,
        )  # fmt: skip
        assert new.revision_b.series is not None
        mbox = bytes(new.revision_b.series.mbox)
        assert mbox.startswith(series.rstrip(b"\n"))
        assert mbox.count(b"\ndiff --git ") == series.count(b"\ndiff --git ") + 1
    assert against_a.revision_a.series is None
    assert against_b.revision_a.series is not None
    assert bytes(against_b.revision_a.series.mbox) == series
    assert f"patch: {source}" in row.outcome
    assert f"comparison {against_a.pk} queued, A against B' (B + your patch)" in row.outcome


def test_tested_by_when_b_prime_is_back_within_the_threshold(reported, jane, smtp):
    row = _handle(_raw("test-inline.eml"))
    against_a, against_b = row.started.order_by("pk")
    _answer(smtp, row)
    for new, verdict in ((against_a, "no-meaningful-change"), (against_b, "improvement")):
        Comparison.objects.filter(pk=new.pk).update(state="done", result="ok", verdict=verdict)
        MetricVerdictFactory.create(comparison=new, verdict=verdict)
        inbound.answer_ended(new.pk)
    sent = {}
    for alert in Alert.objects.filter(kind="result"):
        assert delivery.deliver(alert.pk) == "sent"
        sent[alert.comparison_id] = smtp.received[-1].message.get_content().replace("\r\n", "\n")
    assert sent[against_a.pk].startswith("Tested-by: rcubench <rcubench@bench.example.org>\n")
    assert "Tested-by" not in sent[against_b.pk]  # B against B': nothing to vouch for


def test_test_git_runs_the_branch_against_a(reported, jane):
    """The branch is a ref of the registered tree, resolved by the comparison (a branch
    that is not there is refused by the submission's ref check where the tree's mirror is
    reachable; this tree's is not: preflight skipped). B is a series: only A runs against it."""
    row = _handle(_raw("test-git.eml"))
    [new] = row.started.all()
    c = reported.comparison
    assert (new.revision_b.ref, new.revision_b.series, new.revision_a.ref) == (
        "rcu/next-fix", None, c.revision_a.base_sha,
    )  # fmt: skip
    assert new.requested_by.startswith("test: A against B' by mail <awoxXrm9PPmRIDZo@")
    assert "B against the branch is not run: B is a series on A's base" in row.outcome


def test_invalid_keeps_its_non_ascii_reason(reported):
    joerg = UserFactory.create(username="joerg", email="joerg@tester.example.org")
    MembershipFactory.create(tree=reported.tree, user=joerg, role="admin")
    row = _handle(_raw("invalid.eml"))
    reported.refresh_from_db()
    said = commands.parse(_raw("invalid.eml")).commands[0].argument
    assert not said.isascii()  # quoted-printable UTF-8 in the mail
    assert (reported.state, reported.reason) == ("invalid", said)
    assert f"regression {reported.pk} is invalid now (was untriaged)" in row.outcome


# --- a patch that does not apply, on a real tree --------------------------------------------

FQS = "\tj = READ_ONCE(jiffies_till_first_fqs){};\n"


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.org",
         "-c", "init.defaultBranch=master", *args],
        cwd=cwd, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return done.stdout.decode()


def _tree_c(extra: str) -> str:
    """kernel/rcu/tree.c in small: the first FQS wait on line 22."""
    lines = [f"/* line {i} */\n" for i in range(1, 21)]
    return "".join([*lines, "static void rcu_gp_fqs_loop(void)\n{\n", FQS.format(extra),
                    *(f"\tstep({i});\n" for i in range(10)), "}\n"])  # fmt: skip


@pytest.fixture
def stale_patch(tmp_path) -> dict[str, str]:
    """A real tree (a bare repository the preflight reads, as it reads a local tree): v1,
    then B, which waits one more jiffy. And a fix Jane wrote on her own tree, where the line
    had become `+ 2`: `git format-patch` output that does not apply on B."""
    work = tmp_path / "work"
    (work / "kernel" / "rcu").mkdir(parents=True)
    tree_c = work / "kernel" / "rcu" / "tree.c"
    tree_c.write_text(_tree_c(""))
    _git("init", "--quiet", cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "--quiet", "-m", "rcu: base", cwd=work)
    _git("tag", "v1", cwd=work)
    tree_c.write_text(_tree_c(" + 1"))
    _git("commit", "--quiet", "-am", "rcu: wait one more jiffy before the first FQS", cwd=work)
    _git("clone", "--quiet", "--bare", str(work), str(tmp_path / "tree.git"), cwd=tmp_path)
    _git("checkout", "--quiet", "-b", "jane", "v1", cwd=work)
    tree_c.write_text(_tree_c(" + 2"))
    _git("commit", "--quiet", "-am", "rcu: two more jiffies", cwd=work)
    tree_c.write_text(_tree_c(""))
    _git("commit", "--quiet", "-am", "rcu: restore the first FQS wait", cwd=work)
    patch = _git("format-patch", "--stdout", "-1", "HEAD", cwd=work)
    return {"git_dir": str(tmp_path / "tree.git"), "patch": patch,
            "a": _git("rev-parse", "v1", cwd=work).strip(),
            "b": _git("rev-parse", "master", cwd=work).strip()}  # fmt: skip


def test_a_patch_that_does_not_apply_is_answered_with_gits_error(stale_patch, smtp):
    """The tree is reachable here (a local path): the submission's preflight applies B plus
    the mail's patch on a scratch index, and git's own words come back in the answer."""
    tree = TreeFactory.create(url=stale_patch["git_dir"])
    a = RevisionFactory.create(tree=tree, ref="v1", sha=stale_patch["a"], base_sha="")
    b = RevisionFactory.create(tree=tree, ref="master", sha=stale_patch["b"], base_sha="")
    c = ComparisonFactory.create(revision_a=a, revision_b=b, state="done", result="ok",
                                 verdict="regression")  # fmt: skip
    Alert.objects.create(comparison=c, kind="regression", recipient=JANE, state="sent",
                         subject="[rcubench] x: writer_duration +16.7% regression",
                         message_id=ALERT_ID)  # fmt: skip
    user = UserFactory.create(username="jane", email=JANE)
    MembershipFactory.create(tree=tree, user=user)
    # The body of Jane's format-patch, sent by git send-email with the command first.
    headers, body = stale_patch["patch"].split("\n\n", 1)
    assert "Subject: [PATCH] rcu: restore the first FQS wait" in headers
    raw = (f"From: Jane Developer <{JANE}>\nTo: rcubench <rcubench@bench.example.org>\n"
           "Subject: [PATCH] rcu: restore the first FQS wait\n"
           "Date: Sat, 28 Nov 2026 01:42:09 +0000\nMessage-Id: <stale.1@dev.example.org>\n"
           f"In-Reply-To: {ALERT_ID}\nReferences: {ALERT_ID}\nMIME-Version: 1.0\n"
           "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
           f"#rcubench test\n\n{body}").encode()  # fmt: skip
    before = (Comparison.objects.count(), Revision.objects.count(), PatchSeries.objects.count())
    row = _handle(raw)
    assert not row.started.exists()
    assert (Comparison.objects.count(), Revision.objects.count(),
            PatchSeries.objects.count()) == before  # fmt: skip
    # The inline diff (from its diff --git line) is the patch, under the mail's name.
    assert (
        "> #rcubench test\nrefused: patch 1 ('rcubench test <stale.1@dev.example.org>') "
        "does not apply: kernel/rcu/tree.c, hunk #1 (@@ -20,7 +20,7 @@)"
    ) in row.outcome
    _, msg = _answer(smtp, row)
    body = msg.get_content().replace("\r\n", "\n")
    assert ("  git said:\n"
            "    error: patch failed: kernel/rcu/tree.c:20\n"
            "    error: kernel/rcu/tree.c: patch does not apply\n") in body  # fmt: skip
