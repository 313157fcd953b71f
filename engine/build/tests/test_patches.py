import pytest

from engine.build.git import Checkout, run_git
from engine.build.patches import (
    Applied,
    FuzzSandbox,
    PatchFailed,
    SeriesError,
    apply_series,
    parse_mbox,
)
from engine.build.tests.conftest import FIXTURES


def _apply(checkout, mbox: bytes, *, fallback: bool, scratch=None) -> Applied:
    co = Checkout(checkout, checkout / ".git")
    fuzz = FuzzSandbox(scratch) if scratch is not None else None
    return apply_series(co, parse_mbox(mbox), fallback=fallback, fuzz=fuzz)


def _mbox(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_parse_series_with_cover_letter():
    series = parse_mbox(_mbox("two-patches.mbox"))
    assert [p.subject for p in series.patches] == [
        "rcuscale: Shorten the default holdoff to one second",
        "rcu: Document the jiffies_till_first_fqs default",
    ]
    assert [p.index for p in series.patches] == [1, 2]
    assert series.subject.startswith("[PATCH v2 0/2] rcu: Shorter rcuscale holdoff")
    assert series.message_id.startswith("<cover.")
    assert series.message_id.endswith("@example.org>")
    assert series.patches[0].author == "Ada Example <ada@example.org>"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"Subject: hi\n\nnot an mbox\n", "does not start with a 'From ' line"),
        (b"From x Mon Sep 17 00:00:00 2001\nSubject: cover\n\nno diff here\n", "no patch"),
    ],
)
def test_unusable_mbox_is_refused(data, message):
    with pytest.raises(SeriesError, match=message):
        parse_mbox(data)


def test_two_patch_series_applies_reproducibly(checkout, base_sha):
    mbox = _mbox("two-patches.mbox")
    applied = _apply(checkout, mbox, fallback=False)
    assert applied.method == "git am"
    log = run_git(["log", "--format=%s", f"{base_sha}..HEAD"], cwd=checkout).stdout
    assert log.splitlines() == [
        "rcu: Document the jiffies_till_first_fqs default",
        "rcuscale: Shorten the default holdoff to one second",
    ]
    assert "holdoff, 1," in (checkout / "kernel/rcu/rcuscale.c").read_text()
    # Same base + same series = same sha (committer identity and dates are fixed).
    run_git(["reset", "--quiet", "--hard", base_sha], cwd=checkout)
    again = _apply(checkout, mbox, fallback=False)
    assert again.sha == applied.sha


def test_failed_patch_names_index_subject_file_and_hunk(checkout, base_sha):
    mbox = _mbox("needs-fuzz.mbox")
    with pytest.raises(PatchFailed) as exc:
        _apply(checkout, mbox, fallback=False)
    failure = exc.value
    assert failure.index == 1
    assert failure.subject == "rcuscale: Halve the default holdoff"
    assert failure.file == "kernel/rcu/rcuscale.c"
    assert failure.hunk == "hunk #1 (@@ -88,7 +88,7 @@)"
    assert failure.tried == ["git am"]
    assert "patch failed: kernel/rcu/rcuscale.c:88" in failure.output
    assert "tried git am" in str(failure)
    # Nothing half-applied is left behind.
    assert run_git(["rev-parse", "HEAD"], cwd=checkout).stdout.strip() == base_sha


def test_fallback_applies_with_fuzz_and_says_so(checkout, base_sha, scratch):
    mbox = _mbox("needs-fuzz.mbox")
    applied = _apply(checkout, mbox, fallback=True, scratch=scratch)
    assert applied.method == "patch -F3"
    assert "fuzz" in applied.notes[0]
    assert "holdoff, 5," in (checkout / "kernel/rcu/rcuscale.c").read_text()
    subject = run_git(["log", "-1", "--format=%s%n%an", "HEAD"], cwd=checkout).stdout
    assert subject.splitlines() == ["rcuscale: Halve the default holdoff", "Ada Example"]


def test_conflict_fails_after_every_fallback(checkout, base_sha, scratch):
    mbox = _mbox("conflict.mbox")
    with pytest.raises(PatchFailed) as exc:
        _apply(checkout, mbox, fallback=True, scratch=scratch)
    assert exc.value.tried == ["git am", "git am -3", "patch -F3"]
    assert exc.value.file == "kernel/rcu/rcuscale.c"
    assert run_git(["rev-parse", "HEAD"], cwd=checkout).stdout.strip() == base_sha
