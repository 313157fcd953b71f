"""Kernel command-line extras through the one submission service: off the allow-list or
overriding a benchmark's own parameter is refused naming the parameter, storing nothing."""

import pytest

from webapp.comparisons.models import Comparison
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.factories import TreeFactory
from webapp.trees.models import Revision

pytestmark = pytest.mark.django_db


def _request(benchmarks: tuple[str, ...] = ("sync-rcu-latency",), **kw: str) -> ComparisonRequest:
    return ComparisonRequest(
        tree=TreeFactory.create().name, base_ref="v6.12", benchmarks=benchmarks,
        target="qemu-x86_64", min_runs=24, max_runs=96, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("side", "extra", "message"),
    [
        # Turned every run into a 20-minute timeout (rcuscale never powered off).
        ("b", "rcuscale.shutdown=0", "side B command line: rcuscale.shutdown is set by the "
                                     "benchmark sync-rcu-latency itself"),
        # Won in the guest's init (the last rcubench.bench= was taken).
        ("a", "rcutree.jiffies_till_first_fqs=3 rcubench.bench=bpf-slab",
         "side A command line: rcubench.bench is the guest's own parameter"),
        ("b", "init=/bin/sh", "side B command line: init is set by the runner"),
        ("b", "rcupdate.rcu_cpu_stall_suppress=1", "rcupdate.rcu_cpu_stall_suppress would "
                                                   "silence or postpone stall warnings"),
        ("a", "nosmt", "side A command line: nosmt is not on the allow-list"),
        ("b", "rcutree.x=`reboot`", r"side B command line: 'rcutree.x=`reboot`' is not name"),
    ],
)  # fmt: skip
def test_refused_extras_name_the_parameter_and_nothing_is_stored(side, extra, message):
    with pytest.raises(SubmissionError, match=message):
        submit_comparison(_request(**{f"cmdline_{side}": extra}))
    assert not Comparison.objects.exists()
    assert not Revision.objects.exists()


def test_a_parameter_of_any_requested_benchmark_is_refused():
    with pytest.raises(SubmissionError, match="slab_nomerge is set by the benchmark bpf-slab"):
        submit_comparison(_request(("sync-rcu-latency", "bpf-slab"), cmdline_b="slab_nomerge"))
    assert not Comparison.objects.exists()


def test_rcu_tunables_are_accepted_and_stored_as_given():
    extra = "rcutree.jiffies_till_first_fqs=3 rcu_nocbs=1 nohz_full=1"
    c = submit_comparison(_request(("sync-rcu-latency", "boot-time"), cmdline_b=extra))
    assert (c.cmdline_a, c.cmdline_b) == ("", extra)
