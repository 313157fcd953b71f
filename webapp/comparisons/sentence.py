"""The verdict in one sentence: what the report opens with and the alert mail says first.

Built from the read model only (summary.py's Header and VerdictRows, which sit beside it;
summary.py is at the house's module size limit), so that the page and the mail say the
same thing in the same words. Plain text: the page escapes it, the mail wraps it.
"""

from collections.abc import Sequence

from stats.verdicts import IMPROVEMENT, INCONCLUSIVE, NO_CHANGE, RELIABILITY, SMALL
from webapp.comparisons.summary import Header, KernelFacts, VerdictRow


def kernel_line(k: KernelFacts) -> str:
    """The kernel as people name it (names.py): `tree/branch 12-digit-sha ("subject")`,
    and the series applied on it."""
    return k.name.text


def verdict_sentence(h: Header, rows: Sequence[VerdictRow], kind: str = "") -> str:
    """The verdict in words, one sentence. `kind`: the verdict to tell (an alert mail's
    kind, regression or improvement); by default the comparison's own verdict. The row it
    quotes is the first with that verdict in the read model's order: a primary metric's
    wherever one has it (the comparison's verdict is its most severe primary verdict)."""
    a, b = h.kernels
    t = h.target
    where = f"on {t.name} ({t.arch}, {t.cpus} CPUs)"
    ab = f"from kernel A ({kernel_line(a)}) to kernel B ({kernel_line(b)})"
    kind = kind or h.verdict
    if not h.done:
        return (f"rcubench is comparing kernel B ({kernel_line(b)}) with kernel A "
                f"({kernel_line(a)}) {where}; it is {h.state}, and its verdict comes when "
                f"it is done.")  # fmt: skip
    # The mail asks for its alert kind, "regression" for a reliability regression too:
    # the comparison's own verdict says which regression it is.
    if RELIABILITY in (kind, h.verdict):
        lead = (
            f"rcubench found a reliability regression: kernel B ({kernel_line(b)}) failed "
            f"significantly more often than kernel A ({kernel_line(a)}) {where}."
        )
        if h.error_message:
            lead += f" {h.error_message.strip()}."
        return lead
    if not kind:
        code = f" ({h.error_code})" if h.error_code else ""
        return (f"rcubench could not compare kernel B ({kernel_line(b)}) with kernel A "
                f"({kernel_line(a)}) {where}: the comparison ended {h.result}{code} "
                f"without a verdict.")  # fmt: skip
    top = next((r for r in rows if r.verdict.verdict == kind), None)
    if top is None:
        return (f"rcubench compared kernel B ({kernel_line(b)}) with kernel A "
                f"({kernel_line(a)}) {where}: overall verdict {kind}.")  # fmt: skip
    v = top.verdict
    what = f"{v.benchmark} {v.metric} changed by {_change(top)} {ab}"
    runs = f"{v.n_a} vs {v.n_b} runs"
    p = f"p={top.p_adjusted} adjusted"
    threshold = _threshold(top, h)
    others = sum(1 for r in rows if r.verdict.verdict == kind) - 1
    more = f" ({others} more {kind} rows below)" if others > 0 else ""
    if kind == NO_CHANGE:
        return (f"rcubench found no meaningful change {where}: {what}, {runs}, its "
                f"repeated CI inside ±{threshold}{more}.")  # fmt: skip
    if kind == INCONCLUSIVE:
        mde = v.details.get("smallest_detectable_shift")
        unit = "%" if top.relative else f" {top.unit}"
        smallest = (f"; the smallest shift these runs detect (80% power) is {mde:.2g}{unit}"
                    if isinstance(mde, float | int) else "")  # fmt: skip
        return (f"rcubench could not decide {where}: {what}, {p}, {runs}, neither beyond "
                f"nor inside the ±{threshold} threshold{smallest}{more}.")  # fmt: skip
    if kind == SMALL:
        return (f"rcubench found a significant but small change {where}: {what}, {p}, "
                f"{runs}: real, but within the {threshold} threshold{more}.")  # fmt: skip
    size = (f"beyond the {threshold} threshold" if not _size_uncertain(top) else
            f"its interval reaching the {threshold} threshold (the size is uncertain)")  # fmt: skip
    article = "an" if kind == IMPROVEMENT else "a"
    return f"rcubench found {article} {kind} {where}: {what}, {p}, {runs}, {size}{more}."


def _change(r: VerdictRow) -> str:
    """The shift with its CI and what it is a shift of: "+9.90% [+8.10, +11.70] (HL shift
    of per-run p50s, 95% CI)"."""
    if r.absolute_shift:
        return f"{r.absolute_shift} ({r.shift_label}, 95% CI)"
    if r.ci:
        return f"{r.shift} {r.ci} ({r.shift_label}, 95% CI)"
    return f"{r.shift} ({r.shift_label})"


def _threshold(r: VerdictRow, h: Header) -> str:
    """The practical threshold the row was judged on: % or, for memory, in the unit."""
    t = r.verdict.details.get("threshold")
    if not isinstance(t, float | int):
        return f"{h.threshold_pct:g}%"
    return f"{t:g}%" if r.relative else f"{t:g} {r.unit}"


def _size_uncertain(r: VerdictRow) -> bool:
    """A regression or improvement whose estimate is below its threshold (the interval
    reaches it): stats.verdicts says "size uncertain"."""
    d = r.verdict.details
    t = d.get("threshold")
    estimate = r.verdict.shift_pct if r.relative else d.get("shift")
    return (isinstance(t, float | int) and isinstance(estimate, float | int)
            and abs(estimate) < t)  # fmt: skip
