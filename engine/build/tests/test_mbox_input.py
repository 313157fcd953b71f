"""Hostile mboxes and tree paths at the build engine's edge (no Django): parse_mbox's charset,
header and size rules, validate_rev's length limit, ensure_mirror's temporary directory."""

import mailbox
import re
import subprocess
import time
from pathlib import Path

import pytest

from engine.build.git import (
    MAX_REF_LENGTH,
    BadRefError,
    GitError,
    ensure_mirror,
    mirror_path,
    validate_rev,
)
from engine.build.patches import SeriesError, parse_mbox
from engine.build.tests.conftest import FIXTURES

TWO_PATCHES = (FIXTURES / "two-patches.mbox").read_bytes()
COVER, PATCH_1, PATCH_2 = (m for m in re.split(rb"(?m)^(?=From )", TWO_PATCHES) if m)


def test_a_body_in_an_unknown_charset_is_refused_naming_message_and_charset():
    hostile = TWO_PATCHES.replace(
        b"Subject: [PATCH v2 2/2]", b"Content-Type: text/plain; charset=x-no-such-charset\n"
        b"Subject: [PATCH v2 2/2]",
    )  # fmt: skip
    with pytest.raises(SeriesError, match="message 3 of the mbox: its body is in an unknown "
                       "charset 'x-no-such-charset'"):  # fmt: skip
        parse_mbox(hostile)


def test_a_codec_that_is_not_a_text_encoding_is_refused_too():
    hostile = PATCH_1.replace(b"Subject:", b"Content-Type: text/plain; charset=rot13\nSubject:")
    with pytest.raises(SeriesError, match="unknown charset 'rot13'"):
        parse_mbox(hostile)


def test_an_unknown_charset_in_an_encoded_word_is_decoded_with_replacement():
    hostile = PATCH_1.replace(b"Subject: [PATCH v2 1/2] ", b"Subject: =?x-nope?q?ok=FF?= ")
    (patch,) = parse_mbox(hostile).patches
    assert patch.subject == "ok\ufffd rcuscale: Shorten the default holdoff to one second"


@pytest.mark.parametrize(
    "encoded",
    [
        "=?utf-8?q?a=0D=0ABcc:_x@evil?=",
        "=?utf-8?b?YQ0KQmNjOiB4QGV2aWw=?=",  # the same, base64
        "=?utf-8?q?a=00=0B=1B=C2=85Bcc:_x@evil=E2=80=A8?=",  # NUL, VT, ESC, NEL, U+2028
    ],
)
def test_cr_lf_and_control_characters_in_headers_become_one_space(encoded):
    hostile = (
        TWO_PATCHES.replace(b"Subject: [PATCH v2 0/2] ", f"Subject: {encoded} ".encode())
        .replace(b"Subject: [PATCH v2 1/2] ", f"Subject: [PATCH v2 1/2] {encoded} ".encode())
        .replace(b"Message-Id: <75451", f"Message-Id: {encoded} <75451".encode())
    )
    series = parse_mbox(hostile)
    first = series.patches[0]
    assert series.subject.startswith("a Bcc: x@evil rcu: Shorter")
    assert first.subject.startswith("a Bcc: x@evil rcuscale:")
    assert first.message_id.startswith("a Bcc: x@evil <75451")
    for text in (series.subject, series.message_id, series.author, first.subject,
                 first.message_id, first.author):  # fmt: skip
        assert not re.search(r"[\x00-\x1f\x7f-\x9f\u2028]", text), text


def test_a_display_name_the_stdlib_refuses_is_refused_naming_the_header():
    hostile = PATCH_1.replace(b"From: Ada Example", b"From: =?utf-8?q?Ada=0AExample?=")
    with pytest.raises(SeriesError, match="message 1 of the mbox: its From header cannot be read"):
        parse_mbox(hostile)


def test_too_many_messages_are_refused_before_parsing(monkeypatch):
    def no_parsing(*args: object, **kw: object) -> None:
        raise AssertionError("the mbox was parsed")

    monkeypatch.setattr(mailbox, "mbox", no_parsing)
    huge = COVER + PATCH_1 * 20_000  # 20,001 messages, 30 MB
    started = time.monotonic()
    with pytest.raises(SeriesError, match="the mbox has 20001 messages; a series may have at "
                       r"most 500 patches \(and a cover letter\)"):  # fmt: skip
        parse_mbox(huge, max_patches=500)
    assert time.monotonic() - started < 2  # parsing them would take seconds


def test_the_cap_admits_a_full_series_with_its_cover_letter_and_counts_patches():
    assert len(parse_mbox(COVER + PATCH_1 + PATCH_2, max_patches=2).patches) == 2
    assert len(parse_mbox(COVER + PATCH_1 * 40).patches) == 40  # no cap given: none applies
    with pytest.raises(SeriesError, match="the series has 3 patches; the limit is 2"):
        parse_mbox(PATCH_1 * 3, max_patches=2)  # 3 messages, no cover letter


# --- refs and tree paths -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "~1"])
def test_a_ref_longer_than_the_limit_is_refused_naming_length_and_limit(suffix):
    rev = "a" * 300 + suffix
    with pytest.raises(BadRefError, match=f"is {len(rev)} characters long; the limit is 255"):
        validate_rev(rev)
    assert validate_rev("a" * MAX_REF_LENGTH) == "a" * MAX_REF_LENGTH


def _temporary_mirrors(mirrors: Path) -> list[Path]:
    return [p for p in mirrors.iterdir() if p.name.startswith(".")] if mirrors.exists() else []


@pytest.mark.parametrize("kind", ["plain", "work tree", "file", "missing"])
def test_a_local_tree_that_is_not_a_git_directory_leaves_no_temporary_mirror(tmp_path, kind):
    source = tmp_path / "source"
    if kind == "plain":
        source.mkdir()
    elif kind == "work tree":
        subprocess.run(["git", "init", "--quiet", str(source)], check=True)
    elif kind == "file":
        source.write_text("not a repository\n")
    mirrors = tmp_path / "mirrors"
    with pytest.raises(GitError, match="rev-parse --git-path objects"):
        ensure_mirror(mirrors, str(source), allow_local=True)
    assert _temporary_mirrors(mirrors) == []
    assert [p.name for p in mirrors.iterdir() if not p.name.endswith(".lock")] == []


def test_a_killed_clones_leftover_is_removed_by_the_next_one(tmp_path):
    source = tmp_path / "source.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(source)], check=True)
    mirrors = tmp_path / "mirrors"
    leftover = mirrors / f".{mirror_path(mirrors, str(source)).name}.abcd1234"
    (leftover / "objects").mkdir(parents=True)  # as a SIGKILLed first clone leaves it
    other = mirrors / ".other.git.abcd1234"  # another mirror's: not touched
    other.mkdir()
    mirror = ensure_mirror(mirrors, str(source), allow_local=True)
    assert (mirror / "HEAD").exists()
    assert _temporary_mirrors(mirrors) == [other]
