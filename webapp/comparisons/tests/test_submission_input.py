"""Hostile submission input through `./manage.py compare` (and store_series), as a submitter
would send it: each is refused naming the problem and stores nothing (no tree, series,
revision or comparison row, no temporary mirror), or is stored with its headers on one line.
The fuzz fallback is an explicit opt-in that the report shows."""

import io
import re
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from engine.build.git import MAX_REF_LENGTH
from engine.build.tests.conftest import FIXTURES
from tests.support.factories import TreeFactory
from webapp.comparisons.models import Comparison
from webapp.comparisons.reproducer import reproducer
from webapp.trees.models import Patch, PatchSeries, Revision, Tree
from webapp.trees.services import InvalidSeries, store_series

pytestmark = pytest.mark.django_db

TWO_PATCHES = (FIXTURES / "two-patches.mbox").read_bytes()
PATCH_1 = "Subject: [PATCH v2 1/2] rcuscale: Shorten the default holdoff to one second"


def _messages(mbox: bytes) -> list[bytes]:
    """The fixture's messages (cover letter, patch 1, patch 2), each from its 'From ' line."""
    return [m for m in re.split(rb"(?m)^(?=From )", mbox) if m]


@pytest.fixture
def tree() -> Tree:
    return TreeFactory.create(name="rcu")


@pytest.fixture
def mbox_file(tmp_path):
    def write(data: bytes) -> Path:
        path = tmp_path / "series.mbox"
        path.write_bytes(data)
        return path

    return write


def _compare(*args: str) -> str:
    out = io.StringIO()
    call_command("compare", "--no-wait", *args, stdout=out)
    return out.getvalue()


def _assert_refused(match: str, *args: str) -> None:
    trees = set(Tree.objects.values_list("pk", flat=True))
    with pytest.raises(CommandError, match=match):
        _compare(*args)
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()
    assert not PatchSeries.objects.exists()
    assert not Patch.objects.exists()
    assert set(Tree.objects.values_list("pk", flat=True)) == trees


# --- the mbox ----------------------------------------------------------------------------


def test_an_unknown_charset_is_refused_naming_it(tree, mbox_file):
    hostile = TWO_PATCHES.replace(
        PATCH_1.encode(),
        b"Content-Type: text/plain; charset=x-no-such-charset\n" + PATCH_1.encode(),
    )
    _assert_refused(
        r"bad patch series: message 2 of the mbox: its body is in an unknown charset "
        r"'x-no-such-charset'",
        "--tree", "rcu", "--base", "v6.12", "--series", str(mbox_file(hostile)),
    )  # fmt: skip


def test_a_refused_request_leaves_no_stored_series(tree, mbox_file):
    # A valid mbox, stored first by the request, which the benchmark name then gets refused.
    _assert_refused(
        "unknown benchmark 'no-such-bench'",
        "--tree", "rcu", "--base", "v6.12", "--series", str(mbox_file(TWO_PATCHES)),
        "--bench", "no-such-bench",
    )  # fmt: skip


def test_a_series_stored_by_an_earlier_comparison_survives_a_refused_one(tree, mbox_file):
    path = mbox_file(TWO_PATCHES)
    _compare("--tree", "rcu", "--base", "v6.12", "--series", str(path))
    with pytest.raises(CommandError, match="unknown benchmark"):
        _compare("--tree", "rcu", "--base", "v6.12", "--series", str(path), "--bench", "nope")
    assert PatchSeries.objects.count() == 1
    assert Comparison.objects.count() == 1


def test_a_series_with_too_many_patches_is_refused_before_it_is_parsed(tree, mbox_file):
    cover, patch_1, _ = _messages(TWO_PATCHES)
    huge = cover + patch_1 * 601  # 602 messages: more than 500 patches and a cover letter
    _assert_refused(
        r"bad patch series: the mbox has 602 messages; a series may have at most 500 patches "
        r"\(and a cover letter\)",
        "--tree", "rcu", "--base", "v6.12", "--series", str(mbox_file(huge)),
    )  # fmt: skip


def test_the_patch_cap_is_a_setting_and_counts_patches_without_a_cover_letter(settings):
    settings.RCUBENCH_MAX_SERIES_PATCHES = 3
    _, patch_1, _ = _messages(TWO_PATCHES)
    with pytest.raises(InvalidSeries, match="the series has 4 patches; the limit is 3"):
        store_series(patch_1 * 4)
    assert not PatchSeries.objects.exists()
    assert store_series(patch_1 * 3).patches.count() == 3


def test_cr_lf_and_nul_smuggled_in_encoded_words_are_stored_on_one_line(tree, mbox_file):
    injected = "=?utf-8?q?a=0D=0ABcc:_x@evil=00?="
    hostile = (
        TWO_PATCHES.replace(
            b"Subject: [PATCH v2 0/2] ", f"Subject: [PATCH v2 0/2] {injected} ".encode()
        )
        .replace(PATCH_1.encode(), f"{PATCH_1} {injected}".encode())
        .replace(b"Message-Id: <75451", f"Message-Id: {injected} <75451".encode())
        .replace(
            b"From: Ada Example <ada@example.org>",
            b"From: =?utf-8?q?Ada=00=0BExample?= <ada@example.org>",
        )
    )
    _compare("--tree", "rcu", "--base", "v6.12", "--series", str(mbox_file(hostile)))
    series = PatchSeries.objects.get()
    patch = series.patches.get(index=1)
    stored = [series.subject, series.author, series.message_id, patch.subject, patch.author,
              patch.message_id]  # fmt: skip
    for text in stored:
        assert not re.search(r"[\x00-\x1f\x7f]", text), text
    assert series.subject.startswith("[PATCH v2 0/2] a Bcc: x@evil rcu: Shorter")
    assert patch.subject.endswith("one second a Bcc: x@evil")
    assert patch.message_id.startswith("a Bcc: x@evil <75451")
    assert series.author == patch.author == "Ada Example <ada@example.org>"
    assert bytes(series.mbox) == hostile  # the mbox itself is kept exactly as received


def test_cr_lf_in_an_address_is_refused_naming_the_header(tree, mbox_file):
    hostile = TWO_PATCHES.replace(
        b"From: Ada Example <ada@example.org>",
        b"From: =?utf-8?q?Ada=0D=0ABcc:_x@evil?= <ada@example.org>",
    )
    _assert_refused(
        "message 1 of the mbox: its From header cannot be read: .*CR or LF",
        "--tree", "rcu", "--base", "v6.12", "--series", str(mbox_file(hostile)),
    )  # fmt: skip


# --- refs and numbers ----------------------------------------------------------------------


def test_the_ref_limit_is_the_column_length():
    assert Revision._meta.get_field("ref").max_length == MAX_REF_LENGTH


@pytest.mark.parametrize("option", ["--base", "--head"])
def test_a_ref_longer_than_the_column_is_refused_naming_length_and_limit(tree, option):
    args = {"--base": "v6.12", "--head": "rcu/next", option: "a" * 300}
    side = option.removeprefix("--")
    _assert_refused(
        rf"bad {side} ref: ref 'a{{40}}'\.\.\. is 300 characters long; the limit is 255",
        "--tree", "rcu", *(x for kv in args.items() for x in kv),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--threshold", "nan", "the threshold must be a finite number, got nan"),
        ("--threshold", "inf", "the threshold must be a finite number, got inf"),
        ("--threshold", "1e999", "the threshold must be a finite number, got inf"),
        ("--alpha", "nan", "alpha must be a finite number, got nan"),
        ("--alpha", "-inf", "alpha must be a finite number, got -inf"),
    ],
)
def test_non_finite_numbers_are_refused(tree, option, value, message):
    _assert_refused(message, "--tree", "rcu", "--base", "v6.12", "--head", "rcu/next",
                    f"{option}={value}")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-runs", "401"], r"max runs \(401\) is above the limit of 400 runs per side"),
        (["--runs", "500"], r"min runs \(500\) is above the limit of 400 runs per side"),
        (["--runs", "32767", "--max-runs", "99999"], r"min runs \(32767\) is above the limit"),
    ],
)
def test_runs_beyond_the_configured_maximum_are_refused_naming_it(tree, args, message):
    _assert_refused(message, "--tree", "rcu", "--base", "v6.12", "--head", "rcu/next", *args)


def test_the_runs_limit_is_a_setting(tree, settings):
    settings.RCUBENCH_MAX_RUNS_PER_SIDE = 48
    _assert_refused(r"max runs \(96\) is above the limit of 48 runs per side",
                    "--tree", "rcu", "--base", "v6.12", "--head", "rcu/next")  # fmt: skip
    _compare("--tree", "rcu", "--base", "v6.12", "--head", "rcu/next", "--max-runs", "48")
    assert Comparison.objects.get().max_runs == 48


# --- --tree paths ------------------------------------------------------------------------


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repos(tmp_path, settings) -> Path:
    """A bare repository, a non-bare clone, a plain directory and a file under tmp_path; the
    data dir (where mirrors would go) beside them."""
    settings.RCUBENCH_DATA_DIR = str(tmp_path / "data")
    _git("init", "--quiet", "work", cwd=tmp_path)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty",
         "-m", "x", cwd=tmp_path / "work")  # fmt: skip
    _git("clone", "--quiet", "--bare", "work", "bare.git", cwd=tmp_path)
    (tmp_path / "plain").mkdir()
    (tmp_path / "file").write_text("gitdir: bare.git\n")  # a gitfile naming the bare repo
    return tmp_path


@pytest.mark.parametrize("name", ["plain", "work", "work/.git", "file"])
def test_a_tree_path_that_is_not_a_bare_repository_is_refused(repos, name):
    _assert_refused(
        f"{re.escape(str(repos / name))} is not a bare git repository",
        "--tree", str(repos / name), "--base", "v6.12", "--head", "rcu/next",
    )  # fmt: skip
    assert not (repos / "data").exists()  # no mirror, temporary or not


def test_a_bare_repository_path_is_registered(repos):
    _compare("--tree", str(repos / "bare.git"), "--base", "HEAD", "--head", "HEAD~0")
    assert Comparison.objects.get().revision_a.tree.url == str(repos / "bare.git")


@pytest.mark.parametrize(
    ("directory", "name"),
    [("linux-6.13.git", "linux-6.13"), ("-rc+1.git", "rc-1"), ("..x.git", "x")],
)
def test_a_registered_path_names_its_tree_as_the_name_rule_allows(repos, directory, name):
    """By the one rule (webapp/trees/names.py): a version's dots stay (the tree page of
    `linux-6.13` is /trees/linux-6.13/), what could be read as an option or a path goes."""
    _git("clone", "--quiet", "--bare", "--", "work", directory, cwd=repos)
    _compare("--tree", str(repos / directory), "--base", "HEAD", "--head", "HEAD~0")
    assert Comparison.objects.get().revision_a.tree.name == name


# --- the fuzz opt-in ---------------------------------------------------------------------


def test_fuzz_without_a_series_is_refused(tree):
    _assert_refused("fuzz was allowed, but there is no patch series to apply",
                    "--tree", "rcu", "--base", "v6.12", "--head", "rcu/next",
                    "--allow-fuzz")  # fmt: skip


@pytest.mark.parametrize("allowed", [True, False])
def test_the_fuzz_opt_in_is_recorded_and_shown_in_the_report(tree, mbox_file, client, allowed):
    args = ["--tree", "rcu", "--base", "v6.12", "--series", str(mbox_file(TWO_PATCHES))]
    _compare(*args, *(["--allow-fuzz"] if allowed else []))
    c = Comparison.objects.get()
    assert (c.revision_a.patch_fallback, c.revision_b.patch_fallback) == (False, allowed)

    Revision.objects.filter(pk=c.revision_b_id).update(
        applied_with="patch -F3" if allowed else "git am",
        apply_notes="patch 1 applied with fuzz: Hunk #1 succeeded at 90 (offset 2 lines)."
        if allowed else "",
    )  # fmt: skip
    html = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    if allowed:
        assert 'data-allowed="yes">fuzz allowed' in html
        assert "applied with patch -F3" in html
        assert "Hunk #1 succeeded at 90 (offset 2 lines)." in html
        assert "--allow-fuzz" in reproducer(c)
    else:
        assert 'data-allowed="no">fuzz not allowed' in html
        assert "applied with git am" in html
        assert "--allow-fuzz" not in reproducer(c)
