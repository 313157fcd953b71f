"""The host-load record from /proc text, and CPU pinning in the domain XML: no VM boots.

The /proc lines are captured from this project's 2-core machine, 1 s apart, while a
sync-rcu-latency guest ran (pid 17620 was its QEMU).
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from engine.run.hostload import (
    HostMonitor,
    Sample,
    find_qemu_pid,
    host_load,
    parse_loadavg,
    parse_pid_ticks,
    parse_stat,
)
from engine.vm.domain import Pinning, VMSpec, domain_xml, pinning

STAT_1 = """\
cpu  366195 389 135600 805538 10870 0 2772 1866 0 0
cpu0 175249 184 56967 427611 1261 0 263 912 0 0
cpu1 190946 205 78633 377927 9609 0 2509 954 0 0
intr 8264080 0 0 0 0 0 0 0 0 0
ctxt 22397703
"""
STAT_2 = """\
cpu  366296 389 135615 805618 10870 0 2772 1866 0 0
cpu0 175311 184 56975 427639 1261 0 263 912 0 0
cpu1 190985 205 78639 377978 9609 0 2509 954 0 0
intr 8264980 0 0 0 0 0 0 0 0 0
ctxt 22399703
"""
QEMU_1 = (
    "17620 (qemu-system-x86) S 7623 17619 17619 0 -1 138412416 7490 0 12 0 172 34 0 0 20 0 7 0 "
    "663388 2143911936 25848 18446744073709551615 94457148960768 94457154821205 "
    "140726004140208 0 0 0 268444224 4096 16451 0 0 0 17 1 0 0 0 0 0 94457157933304 "
    "94457163137456 94457346007040 140726004144328 140726004145657 140726004145657 "
    "140726004146140 0\n"
)
QEMU_2 = (
    "17620 (qemu-system-x86) S 7623 17619 17619 0 -1 138412416 9620 0 12 0 276 45 0 0 20 0 7 0 "
    "663388 2144960512 34525 18446744073709551615 94457148960768 94457154821205 "
    "140726004140208 0 0 0 268444224 4096 16451 0 0 0 17 0 0 0 0 0 0 94457157933304 "
    "94457163137456 94457346007040 140726004144328 140726004145657 140726004145657 "
    "140726004146140 0\n"
)
# A real process whose command name has spaces and parentheses (a copy of sleep named so).
ODD_NAME = (
    "17693 (x) (y z) S 1 17689 30587 0 -1 4194304 137 0 0 0 0 0 0 0 20 0 1 0 664440 2990080 "
    "412 18446744073709551615 94106351063040 94106351080969 140725227414400 0 0 0 0 6 0 1 0 "
    "0 17 1 0 0 0 0 0 94106351095056 94106351096320 94106365571072 140725227420381 "
    "140725227420399 140725227420399 140725227421672 0\n"
)
LOADAVG = "0.90 1.06 1.21 2/178 17638\n"


def test_proc_stat_gives_total_idle_steal_ticks_and_the_online_cpu_count():
    cpu = parse_stat(STAT_1)
    assert cpu.total == 366195 + 389 + 135600 + 805538 + 10870 + 0 + 2772 + 1866
    assert cpu.idle == 805538 + 10870
    assert cpu.steal == 1866
    assert cpu.cpus == 2


def test_proc_stat_without_a_cpu_line_is_refused():
    with pytest.raises(ValueError, match="no cpu line"):
        parse_stat("intr 1 2 3\nctxt 4\n")


def test_pid_stat_gives_utime_plus_stime():
    assert parse_pid_ticks(QEMU_1) == 172 + 34
    assert parse_pid_ticks(QEMU_2) == 276 + 45


def test_pid_stat_fields_are_counted_after_the_last_parenthesis_of_the_name():
    # Splitting at the first ")" would read minflt (137) or a later field as utime.
    assert parse_pid_ticks(ODD_NAME) == 0


def test_loadavg_is_the_one_minute_figure():
    assert parse_loadavg(LOADAVG) == 0.90


def test_others_share_is_host_busy_minus_qemu_over_all_ticks():
    first = Sample(0.0, parse_stat(STAT_1), parse_pid_ticks(QEMU_1))
    last = Sample(1.0, parse_stat(STAT_2), parse_pid_ticks(QEMU_2))
    load = host_load(first, last, 0.9)
    assert load is not None
    # Host busy (user + system) 101 + 15 ticks, QEMU 115 of them, of 196 ticks: 1 tick.
    assert load.busy_share == pytest.approx(1 / 196)
    assert load.steal_share == 0.0
    assert (load.host_cpus, load.load_avg, load.seconds, load.pinned) == (2, 0.9, 1.0, False)


def test_a_busy_host_and_steal_show_in_their_shares():
    first = Sample(0.0, parse_stat(STAT_1), 0)
    # 2 s on 2 CPUs: 400 ticks, 100 of them QEMU's, 150 others', 20 stolen, 130 idle.
    user, idle, steal = 366195 + 250, 805538 + 130, 1866 + 20
    text = f"cpu  {user} 389 135600 {idle} 10870 0 2772 {steal} 0 0\ncpu0 0\ncpu1 0\n"
    assert parse_stat(text).total - parse_stat(STAT_1).total == 400
    load = host_load(first, Sample(2.0, parse_stat(text), 100), 1.5)
    assert load is not None
    assert load.busy_share == pytest.approx(150 / 400)
    assert load.steal_share == pytest.approx(20 / 400)


def test_without_the_qemu_pid_busy_share_is_unknown_not_zero():
    first = Sample(0.0, parse_stat(STAT_1), None)
    last = Sample(1.0, parse_stat(STAT_2), None)
    load = host_load(first, last, None)
    assert load is not None
    assert load.busy_share is None
    assert load.steal_share == 0.0


def test_a_window_too_short_to_measure_gives_no_record():
    assert host_load(Sample(0.0, parse_stat(STAT_1), 0), Sample(0.1, parse_stat(STAT_2), 0),
                     None) is None  # fmt: skip


def _fake_proc(root: Path, stat: str, pids: dict[int, tuple[str, bytes]]) -> Path:
    proc = root / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "stat").write_text(stat)
    (proc / "loadavg").write_text(LOADAVG)
    for pid, (pid_stat, cmdline) in pids.items():
        (proc / str(pid)).mkdir(exist_ok=True)
        (proc / str(pid) / "stat").write_text(pid_stat)
        (proc / str(pid) / "cmdline").write_bytes(cmdline)
    return proc


QEMU_CMDLINE = b"/usr/bin/qemu-system-x86_64\0-name\0guest=rcubench-t-1,debug-threads=on\0-S\0"


def test_qemu_pid_comes_from_libvirts_pidfile(tmp_path):
    proc = _fake_proc(tmp_path, STAT_1, {17620: (QEMU_1, b"")})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "rcubench-t-1.pid").write_text("17620")
    assert find_qemu_pid("rcubench-t-1", proc=proc, run_dir=run_dir) == 17620


def test_without_a_pidfile_the_qemu_is_found_by_its_guest_name(tmp_path):
    other = b"/usr/bin/qemu-system-x86_64\0-name\0guest=rcubench-t-10,debug-threads=on\0"
    proc = _fake_proc(tmp_path, STAT_1, {17000: (QEMU_1, other), 17620: (QEMU_1, QEMU_CMDLINE)})
    assert find_qemu_pid("rcubench-t-1", proc=proc, run_dir=tmp_path / "none") == 17620
    assert find_qemu_pid("rcubench-t-2", proc=proc, run_dir=tmp_path / "none") is None


def test_the_monitor_keeps_the_last_sample_taken_while_qemu_lived(tmp_path):
    proc = _fake_proc(tmp_path, STAT_1, {17620: (QEMU_1, QEMU_CMDLINE)})
    now = iter([0.0, 1.0, 1.0, 2.0, 2.0])
    monitor = HostMonitor("rcubench-t-1", every=0.5, proc=proc, run_dir=tmp_path / "none",
                          clock=lambda: next(now))  # fmt: skip
    monitor.start()  # t = 0
    _fake_proc(tmp_path, STAT_2, {17620: (QEMU_2, QEMU_CMDLINE)})
    monitor.poll()  # t = 1: both files changed
    (proc / "17620" / "stat").unlink()  # QEMU exited; the host went on
    (proc / "stat").write_text(STAT_2.replace("366296", "366496"))
    monitor.poll()  # t = 2: no guest, not kept
    load = monitor.result(pinned=True)
    assert load is not None
    assert load.busy_share == pytest.approx(1 / 196)
    assert (load.seconds, load.pinned, load.load_avg) == (1.0, True, 0.9)


def test_an_unreadable_proc_gives_no_record_and_no_error(tmp_path):
    monitor = HostMonitor("rcubench-t-1", proc=tmp_path / "absent", run_dir=tmp_path)
    (tmp_path / "absent").mkdir()
    monitor.start()
    monitor.poll()
    assert monitor.result() is None


# --- pinning ---------------------------------------------------------------------------


def test_no_pinning_without_spare_cores():
    assert pinning(4, range(2)) is None  # this machine: 2 cores, 4 vCPUs
    assert pinning(4, range(5)) is None  # vCPUs + emulator would leave the host nothing


def test_pinning_gives_each_vcpu_and_the_emulator_a_cpu_and_leaves_the_lowest_to_the_host():
    assert pinning(4, range(6)) == Pinning(vcpus=(2, 3, 4, 5), emulator=1)
    # Online CPUs need not be contiguous (some offline, or a cpuset).
    assert pinning(2, [0, 2, 4, 6, 8]) == Pinning(vcpus=(6, 8), emulator=4)


def _spec(tmp_path: Path) -> VMSpec:
    return VMSpec(
        name="rcubench-test-pin", arch="x86_64", machine="pc", kernel=tmp_path / "bzImage",
        initrd=tmp_path / "initrd", cmdline="", sockets=1, cores=2, threads=2, memory_mb=512,
        console_log=tmp_path / "console.log",
    )  # fmt: skip


def test_domain_xml_pins_vcpus_and_emulator_with_cputune_on_a_16_cpu_host(tmp_path):
    spec = _spec(tmp_path)
    xml = domain_xml(spec, pinning(spec.cpus, range(16)))
    dom = ET.fromstring(xml)  # noqa: S314 -- our own XML
    pins = {p.get("vcpu"): p.get("cpuset") for p in dom.findall("cputune/vcpupin")}
    assert pins == {"0": "12", "1": "13", "2": "14", "3": "15"}
    assert dom.find("cputune/emulatorpin").get("cpuset") == "11"  # type: ignore[union-attr]


def test_domain_xml_has_no_cputune_on_a_2_cpu_host(tmp_path):
    spec = _spec(tmp_path)
    dom = ET.fromstring(domain_xml(spec, pinning(spec.cpus, range(2))))  # noqa: S314 -- ours
    assert dom.find("cputune") is None


def test_a_pinning_for_another_vcpu_count_is_refused(tmp_path):
    with pytest.raises(ValueError, match="2 pinned vCPUs"):
        domain_xml(_spec(tmp_path), Pinning(vcpus=(2, 3), emulator=1))
