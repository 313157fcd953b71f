"""Grace-period phases from the RCU trace a kernel dumped on its console.

rcuscale's writer, once done, stops tracing and dumps the buffer itself
(kernel/rcu/rcuscale.c: rcu_ftrace_dump(DUMP_ALL) before "Test complete"), so the dump
comes after every measured grace period and before the writer-duration lines.
ftrace_dump prints, between its own two lines, one line per event in the latency format:

    [    5.712027] Dumping ftrace buffer:
    [    5.712027] ---------------------------------
    [    5.712027] rcu_sche-13        1d..1. 2345678us : rcu_grace_period: rcu_sched 1409 start
    [    5.712027] CPU:1 [LOST 12 EVENTS]
    [    5.712027] ---------------------------------

(task truncated to 8 characters, pid, CPU and flags, microseconds since the buffer began,
a mark, the event and its TP_printk arguments: include/trace/events/rcu.h). The runner
splits the dump off the console (`split`) before any benchmark parser reads it.

Per grace period (by gp_seq; kernel/rcu/tree.c): `start` (rcu_gp_init), the fqs loop's
`fqswait`, `fqsstart`/`fqsend` around each force-quiescent-state scan, and `end`
(rcu_gp_cleanup, traced with the ending number). Its phases, which add up to its
duration:
- init: start to the first fqswait (the rcu_node tree set up, offline CPUs reported);
- first wait: the first fqswait to the first fqsstart (jiffies_till_first_fqs, unless
  every CPU reported first and woke the kthread: then to the end, and no scan ran);
- after: the first scan to the end (scans, the waits between them, cleanup).
The holdout is the CPU (or CPUs, when one scan reported several idle ones) in the last
leaf-level rcu_quiescent_state_report; it is "the kthread's own" when the grace-period
kthread ran on it when that report was made.

Expedited grace periods are paired as the kernel's rcutorture scripts pair them
(tools/testing/selftests/rcutorture/bin/kvm-recheck-rcuscale-ftrace.sh): a start, then
an end of the same number; a second start first, or an end of another number, is a lost
record. Callbacks per batch come from rcu_batch_end's CBs-invoked.

The measured window: rcuscale prints how long its writers ran and how many grace periods
they waited for (`_SCALE`, after the dump). Tracing stops 10 jiffies after the last
writer's last grace period, so the window is the grace periods that started within that
duration before the last one ended; boot's own grace periods, before it, are left out.
On the captured x86_64 console the window held 101 grace periods, rcuscale's count. A
trace with no such line (another benchmark) is one window, every grace period in it.

Loss is counted, never guessed around: the dump's own LOST lines, and normal grace
periods missing from the run of numbers (gp_seq advances by 4 per grace period). A run
whose loss exceeds MAX_LOSS is reported with its loss, and `usable` says its phases are
not to be used.
"""

import itertools
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks.spec import ParseError

MAX_LOSS = 0.01  # the rule: a run that lost more than 1% of its events is not used
_GP_STEP = 4  # gp_seq's low two bits are the phase (kernel/rcu/rcu.h: RCU_SEQ_CTR_SHIFT)

_PRINTK = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_DUMP_BEGIN = "Dumping ftrace buffer:"
_RULE = "---------------------------------"
_EMPTY = "(ftrace buffer empty)"
_EVENT = re.compile(
    r"(?P<task>.{1,16}?)-(?P<pid>\d{1,10})\s+(?P<cpu>\d{1,6})(?P<flags>\S{0,8})\s+(?P<us>\d{1,20})us.:\s"
    r"(?P<event>rcu_\w+):\s(?P<args>.*)$"
)
_LOST = re.compile(r"CPU:(?P<cpu>\d{1,6}) \[LOST (?P<n>\d{1,20}) EVENTS\]")
# rcuscale's own account of its test (rcu_scale_cleanup), printed after the dump:
#   rcu-scale: start: 1729884058 end: 2473094744 duration: 743210686 gps: 101 batches: 102
# (ktime_get_mono_fast_ns() when the writers started and the last one finished).
_SCALE = re.compile(
    r"rcu-scale: start: \d+ end: \d+ duration: (?P<ns>\d{1,20}) gps: (?P<gps>\d{1,9})\b"
)


@dataclass(frozen=True)
class Event:
    task: str
    pid: int
    cpu: int
    us: int
    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class GracePeriod:
    seq: int
    start_us: int
    end_us: int
    init_us: int
    first_wait_us: int
    after_us: int
    scans: int  # force-quiescent-state scans (fqsstart)
    kthread_cpu: int | None  # where the kthread ran when the last report was made
    holdout: tuple[int, ...]  # CPUs in the last leaf-level report; () if none was traced

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us

    @property
    def holdout_is_kthread_cpu(self) -> bool | None:
        if not self.holdout or self.kthread_cpu is None:
            return None
        return self.kthread_cpu in self.holdout


@dataclass(frozen=True)
class Trace:
    gps: tuple[GracePeriod, ...]  # every paired grace period, boot's included
    window: tuple[GracePeriod, ...]  # the benchmark's (see the module's docstring)
    test_gps: int | None  # rcuscale's own count of the window's grace periods
    exp_us: tuple[int, ...]  # expedited grace periods' durations
    batches: tuple[int, ...]  # callbacks invoked per batch
    events: int  # event lines read
    lost_events: int  # the dump's LOST lines, summed
    missing_gps: int  # normal grace periods absent from the run of numbers
    interior_unpaired: int  # a start or an end without its partner, not at the trace's edges
    edge_unpaired: int  # in flight when tracing began or stopped: not a loss
    exp_lost: int

    @property
    def expected_gps(self) -> int:
        traced = len(self.gps) + self.missing_gps + self.interior_unpaired
        if self.test_gps is None:
            return traced
        # The window short of rcuscale's count: those grace periods were not traced.
        return traced + max(0, self.test_gps - len(self.window))

    @property
    def paired_share(self) -> float:
        return len(self.gps) / self.expected_gps if self.expected_gps else 0.0

    @property
    def loss(self) -> float:
        """The larger of the events lost and the grace periods lost, as shares."""
        events = self.lost_events / (self.events + self.lost_events) if self.events else 1.0
        gps = 1.0 - self.paired_share if self.expected_gps else 1.0
        return max(events, gps)

    @property
    def usable(self) -> bool:
        return bool(self.window) and self.loss <= MAX_LOSS


def split(console: str) -> tuple[str, str | None]:
    """The console without the ftrace dump, and the dump's lines (None if it has none).
    Lines the dump did not print (another CPU's messages in the middle) stay in the
    console; an unterminated dump runs to the end of the console. A kernel with tracing
    built in but no event enabled dumps an empty buffer: two lines, also taken off."""
    lines = console.split("\n")
    begin = next((i for i, ln in enumerate(lines) if ln.rstrip("\r").endswith(_DUMP_BEGIN)), None)
    if begin is None:
        return console, None
    kept, dump = lines[:begin], [lines[begin]]
    rules = 0
    for i, line in enumerate(lines[begin + 1 :], begin + 1):
        body = _PRINTK.sub("", line.rstrip("\r"))
        if body == _RULE:
            rules += 1
            dump.append(line)
            if rules == 2:
                kept.extend(lines[i + 1 :])
                break
        elif body.strip() == _EMPTY:  # printed instead of both rules
            dump.append(line)
            kept.extend(lines[i + 1 :])
            break
        elif _EVENT.match(body) or _LOST.match(body) or not body:
            dump.append(line)
        else:
            kept.append(line)
    return "\n".join(kept), "\n".join(dump)


def events(dump: str) -> tuple[list[Event], int]:
    """The dump's events in order, and the events its LOST lines say were dropped."""
    found: list[Event] = []
    lost = 0
    for line in dump.split("\n"):
        body = _PRINTK.sub("", line.rstrip("\r"))
        if m := _EVENT.match(body):
            found.append(Event(
                task=m.group("task").strip(), pid=int(m.group("pid")), cpu=int(m.group("cpu")),
                us=int(m.group("us")), name=m.group("event"), args=tuple(m.group("args").split()),
            ))  # fmt: skip
        elif m := _LOST.match(body):
            lost += int(m.group("n"))
    return found, lost


def parse_console(console: str) -> Trace:
    """The trace in a whole console, as a traced run printed it."""
    rest, dump = split(console)
    if dump is None:
        raise ParseError("no ftrace dump on the console (tracing off, or the test never ended)")
    return parse(dump, rest)


def parse(dump: str, console: str) -> Trace:
    """The trace in `dump` (what `split` took off the console), its window from the rest
    of the `console`. ParseError when the dump holds no RCU event: a traced run whose
    kernel printed none is a failed diagnostic run, not an empty trace."""
    evs, lost = events(dump)
    if not evs:
        raise ParseError("the ftrace dump holds no RCU events (were the tracepoints enabled?)")
    gps, missing, interior, edge = _grace_periods(evs)
    since, test_gps = None, None
    if (scale := _SCALE.search(console)) is not None and gps:
        test_gps = int(scale.group("gps"))
        since = gps[-1].end_us - int(scale.group("ns")) // 1000
    window = tuple(g for g in gps if since is None or g.start_us >= since)
    inside = [e for e in evs if since is None or e.us >= since]
    exp, exp_lost = _expedited(inside)
    invoked = (_number(e.args[1].removeprefix("CBs-invoked=")) for e in inside
               if e.name == "rcu_batch_end" and e.args[1:2]
               and e.args[1].startswith("CBs-invoked="))  # fmt: skip
    batches = tuple(n for n in invoked if n is not None)
    return Trace(
        gps=tuple(gps), window=window, test_gps=test_gps, exp_us=tuple(exp), batches=batches,
        events=len(evs), lost_events=lost, missing_gps=missing, interior_unpaired=interior,
        edge_unpaired=edge, exp_lost=exp_lost,
    )  # fmt: skip


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _grace_periods(evs: list[Event]) -> tuple[list[GracePeriod], int, int, int]:
    by_seq: dict[int, list[tuple[int, Event]]] = {}
    leaf_level = 0
    for i, e in enumerate(evs):
        if e.name in ("rcu_grace_period", "rcu_quiescent_state_report",
                      "rcu_grace_period_init", "rcu_fqs") and len(e.args) >= 2:  # fmt: skip
            seq = _number(e.args[1])
            if seq is not None:
                by_seq.setdefault(seq, []).append((i, e))
        if e.name == "rcu_grace_period_init" and len(e.args) >= 3:
            leaf_level = max(leaf_level, _number(e.args[2]) or 0)
    starts = {s: i for s, es in by_seq.items() for i, e in es if _gp(e, "start")}
    ends = {s: i for s, es in by_seq.items() for i, e in es if _gp(e, "end")}
    gps: list[GracePeriod] = []
    interior = edge = 0
    first_start = min(starts.values(), default=len(evs))
    last_start = max(starts.values(), default=-1)
    for seq in sorted(set(starts) | set(ends)):
        if seq in starts and seq in ends and starts[seq] < ends[seq]:
            gps.append(_phases(seq, [e for i, e in by_seq[seq] if starts[seq] <= i <= ends[seq]],
                               leaf_level))  # fmt: skip
        elif seq in ends and seq not in starts and ends[seq] < first_start:
            edge += 1  # begun before tracing did
        elif seq in starts and seq not in ends and starts[seq] == last_start:
            edge += 1  # in flight when tracing stopped
        else:
            interior += 1
    numbers = sorted(starts)
    missing = sum(max(0, (b - a) // _GP_STEP - 1) for a, b in itertools.pairwise(numbers))
    return gps, missing, interior, edge


def _gp(e: Event, what: str) -> bool:
    return e.name == "rcu_grace_period" and len(e.args) >= 3 and e.args[2] == what


def _phases(seq: int, evs: list[Event], leaf_level: int) -> GracePeriod:
    start, end = evs[0], evs[-1]
    kthread = start.pid
    waits = [e.us for e in evs if _gp(e, "fqswait")]
    scans = [e.us for e in evs if _gp(e, "fqsstart")]
    first_wait_at = waits[0] if waits else end.us
    first_scan_at = scans[0] if scans else end.us
    reports = [e for e in evs if e.name == "rcu_quiescent_state_report" and len(e.args) >= 6]
    leaf = [e for e in reports if _number(e.args[3]) == leaf_level]
    holdout: tuple[int, ...] = ()
    kthread_cpu = None
    if leaf:
        last = leaf[-1]
        mask = _mask(last.args[2].split(">")[0])
        grplo = _number(last.args[4]) or 0
        holdout = tuple(grplo + bit for bit in range(mask.bit_length()) if mask >> bit & 1)
        ran = [e.cpu for e in evs if e.pid == kthread and e.us <= last.us]
        kthread_cpu = ran[-1] if ran else None
    return GracePeriod(
        seq=seq, start_us=start.us, end_us=end.us,
        init_us=first_wait_at - start.us,
        first_wait_us=min(first_scan_at, end.us) - first_wait_at,
        after_us=end.us - min(first_scan_at, end.us),
        scans=len(scans), kthread_cpu=kthread_cpu, holdout=holdout,
    )  # fmt: skip


def _mask(text: str) -> int:
    """A report's hex mask; 0 (no holdout named) for one no kernel prints: a leaf's mask
    has one bit per CPU of the leaf (CONFIG_RCU_FANOUT_LEAF, at most 64)."""
    if len(text) > 16:
        return 0
    try:
        return int(text, 16)
    except ValueError:
        return 0


def _expedited(evs: Iterable[Event]) -> tuple[list[int], int]:
    durations: list[int] = []
    lost = 0
    pending: tuple[str, int] | None = None
    for e in evs:
        if e.name != "rcu_exp_grace_period" or len(e.args) < 3:
            continue
        seq, what = e.args[1], e.args[2]
        if what == "start":
            if pending is not None:
                lost += 1
            pending = (seq, e.us)
        elif what == "end":
            if pending is not None and pending[0] == seq:
                durations.append(e.us - pending[1])
            else:
                lost += 1
            pending = None
    return durations, lost


def summary(trace: Trace) -> dict[str, float]:
    """One run's values, the medians its grace periods give (ms), for the run-level
    comparison of A and B; empty when the run is not usable."""
    if not trace.usable:
        return {}
    gps = trace.window
    holdouts = [g.holdout_is_kthread_cpu for g in gps if g.holdout_is_kthread_cpu is not None]
    values = {
        "gp_duration": statistics.median(g.duration_us for g in gps) / 1000,
        "gp_init": statistics.median(g.init_us for g in gps) / 1000,
        "gp_first_fqs_wait": statistics.median(g.first_wait_us for g in gps) / 1000,
        "gp_after_first_fqs": statistics.median(g.after_us for g in gps) / 1000,
        "fqs_scans": statistics.mean(g.scans for g in gps),
    }
    if holdouts:
        values["holdout_kthread_cpu_share"] = sum(holdouts) / len(holdouts)
    if trace.batches:
        values["callbacks_per_batch"] = statistics.median(trace.batches)
    if trace.exp_us:
        values["exp_gp_duration"] = statistics.median(trace.exp_us) / 1000
    return values


def digest(trace: Trace) -> dict[str, Any]:
    """What a report and the golden files keep of a trace (JSON): its counts, its loss,
    the window's FQS scan counts and the run's values (summary)."""
    return {
        "events": trace.events,
        "lost_events": trace.lost_events,
        "grace_periods": len(trace.gps),
        "window": len(trace.window),
        "test_gps": trace.test_gps,
        "missing_gps": trace.missing_gps,
        "interior_unpaired": trace.interior_unpaired,
        "edge_unpaired": trace.edge_unpaired,
        "paired_share": trace.paired_share,
        "loss": trace.loss,
        "expedited": len(trace.exp_us),
        "expedited_lost": trace.exp_lost,
        "usable": trace.usable,
        "fqs_scans": {str(k): n for k, n in sorted(Counter(g.scans for g in trace.window).items())},
        "summary": summary(trace),
    }


# The header ftrace's own text form starts with (/sys/kernel/tracing/trace, nop tracer).
_TEXT_HEADER = (
    "# tracer: nop\n#\n"
    "#           TASK-PID     CPU#  ||||   TIMESTAMP  FUNCTION\n"
    "#              | |         |   ||||      |         |\n"
)


def text(dump: str) -> str:
    """The dump in ftrace's text form, as /sys/kernel/tracing/trace prints it and trace
    viewers open it (Perfetto's systrace importer, KernelShark's text import): task-pid,
    [cpu], four latency flags (irqs-off, need-resched, irq context, preempt depth: the
    kernel's fifth, migrate-disable, is left off, as older kernels print it), seconds with
    microseconds, the event and its fields. LOST lines are kept as ftrace prints them."""
    out = [_TEXT_HEADER]
    for line in dump.split("\n"):
        body = _PRINTK.sub("", line.rstrip("\r"))
        if m := _EVENT.match(body):
            us = int(m.group("us"))
            flags = (m.group("flags") + "....")[:4]
            out.append(f"{m.group('task').strip():>16}-{m.group('pid'):<7} "
                       f"[{int(m.group('cpu')):03d}] {flags} {us // 10**6:5d}.{us % 10**6:06d}: "
                       f"{m.group('event')}: {m.group('args')}\n")  # fmt: skip
        elif _LOST.match(body):
            out.append(body + "\n")
    return "".join(out)
