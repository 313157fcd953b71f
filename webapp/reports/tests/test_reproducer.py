"""The reproducer: the `./manage.py compare` line, read back by the command's own parser."""

import shlex

import pytest

from tests.support.factories import (
    ComparisonFactory,
    PatchSeriesFactory,
    RevisionFactory,
    TargetFactory,
)
from webapp.comparisons.management.commands.compare import Command as CompareCommand
from webapp.comparisons.reproducer import reproducer

pytestmark = pytest.mark.django_db


def _parse_compare(line: str):
    """The reproducer's compare line, parsed by the real command's own argument parser."""
    argv = shlex.split(line)
    assert argv[:2] == ["./manage.py", "compare"]
    return CompareCommand().create_parser("manage.py", "compare").parse_args(argv[2:])


def test_reproducer_for_two_refs(done_comparison):
    c = done_comparison
    c.cmdline_a = "rcupdate.rcu_normal=1 foo='a b'"
    c.alpha, c.threshold_pct, c.min_runs, c.max_runs = 0.01, 1.5, 30, 60
    c.save()
    text = reproducer(c)
    assert "\n" not in text
    opts = _parse_compare(text)
    assert opts.tree == c.revision_a.tree.name
    assert (opts.base, opts.head, opts.series) == ("v6.12", "rcu/next", None)
    assert opts.bench == ["sync-rcu-latency"]
    assert (opts.arch, opts.target) == ("x86_64", "qemu-x86_64")
    assert (opts.runs, opts.max_runs) == (30, 60)
    assert opts.cmdline_a == "rcupdate.rcu_normal=1 foo='a b'"
    assert opts.cmdline_b == "rcutree.jiffies_till_first_fqs=3 rcupdate.rcu_expedited=1"
    assert (opts.threshold, opts.alpha) == (1.5, 0.01)
    assert opts.seed == c.seed
    assert not opts.allow_fuzz


def test_reproducer_names_every_benchmark_and_leaves_out_empty_cmdlines():
    c = ComparisonFactory.create(
        benchmarks=["boot-time", "bpf-slab"],
        target=TargetFactory.create(name="qemu-ppc64le", arch="ppc64le"),
    )
    argv = shlex.split(reproducer(c))
    assert "--cmdline-a" not in argv
    assert "--cmdline-b" not in argv
    opts = _parse_compare(reproducer(c))
    assert opts.bench == ["boot-time", "bpf-slab"]
    assert (opts.arch, opts.target) == ("ppc64le", "qemu-ppc64le")
    assert (opts.runs, opts.max_runs, opts.threshold, opts.alpha) == (24, 96, 2.0, 0.05)


def test_reproducer_for_a_series_downloads_its_mbox_first(settings):
    settings.RCUBENCH_PUBLIC_URL = "https://rcubench.example.org/"
    series = PatchSeriesFactory.create()
    a = RevisionFactory.create(ref="v6.12")
    c = ComparisonFactory.create(
        revision_a=a, revision_b=RevisionFactory.create(tree=a.tree, ref="v6.12", series=series)
    )
    curl, compare = reproducer(c).split("\n")
    url = f"https://rcubench.example.org/series/{series.pk}/mbox"
    assert shlex.split(curl) == ["curl", "-o", f"series-{series.pk}.mbox", url]
    opts = _parse_compare(compare)
    assert (opts.base, opts.head) == ("v6.12", "")
    assert str(opts.series) == f"series-{series.pk}.mbox"


def test_reproducer_uses_the_default_url_without_the_setting(settings):
    del settings.RCUBENCH_PUBLIC_URL
    series = PatchSeriesFactory.create()
    c = ComparisonFactory.create(revision_b=RevisionFactory.create(series=series))
    assert f"http://127.0.0.1:8000/series/{series.pk}/mbox" in reproducer(c)


def test_reproducer_says_what_the_command_cannot_redo():
    series_a, series_b = PatchSeriesFactory.create(), PatchSeriesFactory.create()
    a = RevisionFactory.create(ref="v6.12", series=series_a)
    b = RevisionFactory.create(tree=a.tree, ref="rcu/dev", series=series_b)
    lines = reproducer(ComparisonFactory.create(revision_a=a, revision_b=b)).split("\n")
    assert lines[0].startswith("curl ")
    assert lines[1:3] == [
        f"# note: side A had series {series_a.pk} applied, which this cannot redo",
        "# note: side B applied the series on rcu/dev, this applies it on v6.12",
    ]
    assert _parse_compare(lines[3]).series.name == f"series-{series_b.pk}.mbox"


@pytest.mark.parametrize("allowed", [True, False])
def test_reproducer_carries_the_fuzz_opt_in_of_the_series(allowed):
    a = RevisionFactory.create(ref="v6.12")
    b = RevisionFactory.create(
        tree=a.tree, ref="v6.12", series=PatchSeriesFactory.create(), patch_fallback=allowed
    )
    compare = reproducer(ComparisonFactory.create(revision_a=a, revision_b=b)).split("\n")[-1]
    assert ("--allow-fuzz" in shlex.split(compare)) is allowed
    assert _parse_compare(compare).allow_fuzz is allowed


def test_reproducer_leaves_out_fuzz_without_a_series():
    # Nothing to fuzz, and the command refuses --allow-fuzz without --series.
    a = RevisionFactory.create(ref="v6.12")
    b = RevisionFactory.create(tree=a.tree, ref="rcu/next", patch_fallback=True)
    assert "--allow-fuzz" not in shlex.split(
        reproducer(ComparisonFactory.create(revision_a=a, revision_b=b))
    )


@pytest.mark.parametrize("seed", [0, 7, 2**62 - 1, None])  # None: the model's random default
def test_reproducer_carries_the_schedule_seed(seed):
    c = ComparisonFactory.create(**({} if seed is None else {"seed": seed}))
    argv = shlex.split(reproducer(c))
    assert argv[argv.index("--seed") + 1] == str(c.seed)
    assert _parse_compare(reproducer(c)).seed == c.seed


def test_a_presets_reproducer_names_it_and_says_what_it_sets():
    c = ComparisonFactory.create(benchmarks=["sync-rcu-latency", "sync-rcu-latency--many-writers"])
    *notes, compare = reproducer(c).split("\n")
    assert _parse_compare(compare).bench == ["sync-rcu-latency", "sync-rcu-latency--many-writers"]
    assert notes == [
        "# sync-rcu-latency--many-writers: preset many-writers of sync-rcu-latency, which sets "
        "rcuscale.nwriters=16; its kernel command line: rcuscale.shutdown=1 rcuscale.holdoff=1 "
        "rcuscale.nwriters=16 rcuscale.nreaders=0"
    ]
