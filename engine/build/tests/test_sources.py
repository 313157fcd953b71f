import pytest

from engine.build.sources import UnsafeSourceError, validate_tree_url


@pytest.mark.parametrize(
    "url",
    [
        "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git",
        "git://git.kernel.org/pub/scm/linux/kernel/git/rcu/linux.git",
        "ssh://git@git.kernel.org/pub/scm/linux/kernel/git/paulmck/linux-rcu.git",
        "git@github.com:torvalds/linux.git",
    ],
)
def test_network_urls_are_accepted(url):
    assert validate_tree_url(url) == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "empty"),
        (" https://example.org/x.git", "surrounding white space"),
        ("-oProxyCommand=sh", "starts with '-'"),
        ("ext::sh -c 'id >/tmp/x'", "remote helper"),
        ("fd::3", "remote helper"),
        ("file:///etc/passwd", "scheme file"),
        ("http://example.org/linux.git", "scheme http"),
        ("https:///nohost.git", "no host"),
        ("https://example.org/a b.git", "white space"),
        ("https://example.org/a\nb.git", "white space"),
        ("/srv/git/linux.git", "only an operator"),
        ("relative/path", "scheme (none)"),
    ],
)
def test_unsafe_urls_are_refused_with_the_reason(url, reason):
    with pytest.raises(UnsafeSourceError) as exc:
        validate_tree_url(url)
    assert reason in str(exc.value)


def test_local_paths_only_for_operators():
    assert validate_tree_url("/srv/git/linux.git", allow_local=True) == "/srv/git/linux.git"
    with pytest.raises(UnsafeSourceError, match="starts with '-'"):
        validate_tree_url("-/x", allow_local=True)
