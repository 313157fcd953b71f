"""Series by message-id through b4 (given the local mbox here: tests do not reach lore)."""

import pytest

from engine.build.lore import LoreError, fetch_series, validate_message_id
from engine.build.patches import parse_mbox
from engine.build.tests.conftest import FIXTURES

COVER = "<cover.1795239884.git.ada@example.org>"


def test_b4_turns_a_thread_into_the_series_git_am_takes():
    mbox = fetch_series(COVER, local_mbox=FIXTURES / "two-patches.mbox")
    series = parse_mbox(mbox)
    assert [p.subject for p in series.patches] == [
        "rcuscale: Shorten the default holdoff to one second",
        "rcu: Document the jiffies_till_first_fqs default",
    ]


@pytest.mark.parametrize(
    "bad", ["", "--upload-pack=x@y", "no-at-sign", "a@b/../c", "<a b@c>", "-x@example.org"]
)
def test_a_malformed_message_id_is_refused_before_b4_runs(bad):
    with pytest.raises(LoreError, match="is not a message-id"):
        validate_message_id(bad)


def test_a_message_id_b4_cannot_find_is_an_error_naming_it():
    # Here lore is unreachable; where it is reachable this message-id does not exist.
    with pytest.raises(LoreError, match=r"cannot fetch <no-such-series\.rcubench@example\.org>"):
        fetch_series("<no-such-series.rcubench@example.org>", timeout=60)
