"""A side's kernel command-line extras: the allow-list, and the run's command line."""

import pytest

from benchmarks.cmdline import CmdlineError, Param, check_extra, compose
from benchmarks.registry import BENCHMARKS, get

SYNC = get("sync-rcu-latency").spec
ALL = [b.spec for b in BENCHMARKS.values()]


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "rcutree.jiffies_till_first_fqs=1",
        "rcutree.jiffies-till-next-fqs=2 rcupdate.rcu_expedited=1 rcutree.use_softirq=0",
        "rcupdate.rcu_normal_after_boot rcupdate.rcu_boot_end_delay=5000 srcutree.convert_to_big=1",
        "nohz=off nohz_full=1-3 isolcpus=nohz,domain,1-3 irqaffinity=0 rcu_nocbs rcu_nocb_poll",
        "rcu_nocbs=0-7:2/4 threadirqs skew_tick=1 preempt=full mitigations=off",
    ],
)
def test_rcu_tunables_and_isolation_knobs_pass(extra):
    assert check_extra(extra, ALL) == [
        Param(*(t.split("=", 1) if "=" in t else (t, None))) for t in extra.split()
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # Made every run a 20-minute timeout.
        ("rcuscale.shutdown=0", "rcuscale.shutdown is set by the benchmark sync-rcu-latency"),
        ("rcuscale.nwriters=8", "rcuscale.nwriters is set by the benchmark sync-rcu-latency"),
        ("rcuscale.gp_exp=1", "rcuscale.gp_exp configures the benchmark itself"),
        ("rcuscale.scale_type=srcu", "rcuscale.scale_type configures the benchmark itself"),
        # Won in the guest's init, which took the last one.
        ("rcubench.bench=bpf-slab", "rcubench.bench is the guest's own parameter"),
        ("init=/bin/sh", "init is set by the runner"),
        ("rdinit=/bin/sh", "rdinit is set by the runner"),
        ("console=ttyS1", "console is set by the runner"),
        ("panic=0", "panic is set by the runner"),
        ("rcupdate.rcu_cpu_stall_suppress=1", "would silence or postpone stall warnings"),
        ("rcutree.rcu-cpu-stall-timeout=300", "would silence or postpone stall warnings"),
        ("loglevel=0", "loglevel is not on the allow-list"),
        ("nosmt", "nosmt is not on the allow-list"),
        ("maxcpus=1", "maxcpus is not on the allow-list"),
        ("mitigations=auto,nosmt", r"mitigations must be off\|auto, not 'auto,nosmt'"),
        ("nohz", r"nohz needs a value \(on\|off\)"),
        ("threadirqs=1", "threadirqs takes no value"),
        ("isolcpus=1-3;reboot", "'isolcpus=1-3;reboot' is not name or name=value"),
        ('rcutree.x="a b"', "is not name or name=value of plain characters"),
        ("rcutree.x=$(reboot)", "is not name or name=value"),
        ("rcutree.x=`id`", "is not name or name=value"),
        ("rcutree.x=1 -- rcubench.bench=x", "'--' is not name or name=value"),
        ("rcutree.x= ", "'rcutree.x=' is not name or name=value"),
        ("rcutree.x=1 rcutree.x=2", "rcutree.x is given twice"),
        ("rcupdate.rcu_normal=1 rcupdate.rcu-normal=0", "rcupdate.rcu-normal is given twice"),
    ],
)
def test_anything_else_is_refused_naming_the_parameter(extra, message):
    with pytest.raises(CmdlineError, match=message):
        check_extra(extra, [SYNC])


def test_a_benchmarks_own_flag_is_refused_only_for_that_benchmark():
    bpf = get("bpf-slab").spec
    with pytest.raises(CmdlineError, match="slab_nomerge is set by the benchmark bpf-slab"):
        check_extra("slab_nomerge", [SYNC, bpf])
    assert check_extra("slab_nomerge", [SYNC]) == [Param("slab_nomerge", None)]


def test_the_benchmarks_own_parameters_come_first_for_the_guest_and_last_for_the_kernel():
    own = get("smt-toggle").spec.cmdline  # rcubench.bench=smt-toggle rcubench.cycles=10 ...
    line = compose(own, "rcutree.x=1 rcubench.cycles=1 rcuscale.shutdown=1").split()
    assert line[:2] == ["rcubench.bench=smt-toggle", "rcubench.cycles=10"]
    assert line[2:5] == ["rcutree.x=1", "rcubench.cycles=1", "rcuscale.shutdown=1"]
    assert line[-1] == "rcuscale.shutdown=0"
    assert compose(SYNC.cmdline, "") == SYNC.cmdline
