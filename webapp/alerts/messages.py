"""Alert mails as text and headers: data in, email.message.EmailMessage out (no database).

The mails are read in mutt by kernel developers: plain text, lines of at most 78 columns,
a fixed-width verdict table, and a reply in the patch's own thread (In-Reply-To and
References in the headers, never in the body). Every header value passes through
`header_text` or `message_ids` first: stored subjects, authors and message-ids come from
submitted mboxes, and a CR or LF in a header would let them write headers of their own.
"""

import re
import shlex
import textwrap
import unicodedata
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime

from webapp.comparisons.console_diff import ConsoleDifference
from webapp.comparisons.guards import guard_lines
from webapp.comparisons.sentence import kernel_line, verdict_sentence
from webapp.comparisons.summary import Header, KernelFacts, VerdictRow

WIDTH = 72  # body text; the table and the reproducer's lines stay within 78
TABLE_WIDTH = 78
SUBJECT_MAX = 200
# SMTP line endings; headers are not folded below RFC 5322's 998 (Python's folder would put
# a subject starting with "[" on a continuation line of its own, which shows as a leading
# space in some clients). Header values here are at most a few hundred characters.
MAIL_POLICY = policy.SMTP.clone(max_line_length=998)
# What may stand between the angle brackets of a message-id here: no spaces, brackets or
# controls (RFC 5322 msg-id, as far as real mailers write them).
_MSG_ID = re.compile(r"<[^<>\s\"\\]{1,250}@[^<>\s\"\\]{1,250}>")
# Verdict names as short as the table's column.
SHORT_VERDICT = {
    "reliability-regression": "reliability",
    "significant-but-small": "small",
    "significant-size-not-estimated": "significant",
    "no-meaningful-change": "no change",
}


def header_text(text: str, limit: int = SUBJECT_MAX) -> str:
    """`text` fit for a header: every control, format or line/paragraph separator character
    (CR, LF, NUL, TAB, bidi overrides...) becomes a space, runs of spaces one, at most
    `limit` characters."""
    cleaned = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp") else ch
        for ch in text
    )
    cleaned = " ".join(cleaned.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1].rstrip() + "\u2026"


def message_ids(*texts: str) -> list[str]:
    """The well-formed message-ids in `texts` (a bare id gets its angle brackets), once each,
    in order; anything else is dropped."""
    out: list[str] = []
    for text in texts:
        text = text.strip()
        if text and "<" not in text:
            text = f"<{text}>"
        for mid in _MSG_ID.findall(text):
            if mid not in out:
                out.append(mid)
    return out


def reply_subject(subject: str) -> str:
    """`Re: <subject>`, with one Re: however many the stored subject has."""
    s = header_text(subject, SUBJECT_MAX - 4)
    while s[:3].lower() == "re:":
        s = s[3:].lstrip()
    return f"Re: {s}"


@dataclass(frozen=True)
class Envelope:
    """The headers of one alert mail."""

    from_addr: str
    to_addr: str
    subject: str
    message_id: str
    unsubscribe_url: str
    date: datetime
    in_reply_to: str = ""
    references: Sequence[str] = ()
    extra: dict[str, str] = field(default_factory=dict)  # X-rcubench-* facts for filters


def email_message(env: Envelope, body: str) -> EmailMessage:
    """The message: headers set through the email package (its policy refuses any CR/LF
    that would have got past `header_text`), the body as UTF-8 text."""
    msg = EmailMessage(policy=MAIL_POLICY)
    msg["From"] = header_text(env.from_addr, 998)
    msg["To"] = header_text(env.to_addr, 998)
    msg["Subject"] = header_text(env.subject)
    msg["Date"] = format_datetime(env.date)
    msg["Message-ID"] = _one_id(env.message_id)
    parent = message_ids(env.in_reply_to)
    if parent:
        msg["In-Reply-To"] = parent[0]
        msg["References"] = " ".join(message_ids(*env.references, parent[0]))
    # RFC 8058 one-click unsubscribe: the mail client POSTs List-Unsubscribe=One-Click.
    msg["List-Unsubscribe"] = f"<{header_text(env.unsubscribe_url, 900)}>"
    msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to us
    msg["Precedence"] = "bulk"
    for name, value in env.extra.items():
        msg[name] = header_text(value, 200)
    msg.set_content(body, charset="utf-8")
    return msg


def _one_id(mid: str) -> str:
    ids = message_ids(mid)
    if not ids:
        raise ValueError(f"not a message-id: {mid!r}")
    return ids[0]


# --- bodies -------------------------------------------------------------------------------


def _para(text: str, indent: str = "") -> str:
    # Never break a word: a URL or a message-id cut in two is useless.
    return textwrap.fill(" ".join(text.split()), WIDTH, initial_indent=indent,
                         subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)  # fmt: skip


# metric (22) shift (8) CI (17) p (7) runs (7) verdict (12) with one-space gaps: 78 columns
_COLS = ((22, "<"), (8, ">"), (17, ">"), (7, ">"), (7, ">"), (12, "<"))


def _table_line(cells: Sequence[str]) -> str:
    parts = [f"{c:{align}{w}}" for c, (w, align) in zip(cells, _COLS, strict=True)]
    return " ".join(parts).rstrip()


def verdict_table(rows: Sequence[VerdictRow], limit: int = 30) -> list[str]:
    """The verdicts as a fixed-width table (primary metrics first, as the report orders
    them); rows with no meaningful change beyond the primaries are counted, not listed."""
    shown = [r for r in rows if r.verdict.is_primary or r.verdict.verdict != "no-meaningful-change"]
    hidden = len(rows) - len(shown[:limit])
    lines = [_table_line(("metric", "shift", "95% CI", "p adj", "runs", "verdict")),
             _table_line(tuple("-" * w for w, _ in _COLS))]  # fmt: skip
    for r in shown[:limit]:
        v = r.verdict
        label = f"{v.benchmark}/{v.metric} {v.statistic}" + (" *" if v.is_primary else "")
        cells = [label, r.shift, r.ci, r.p_adjusted, f"{v.n_a}/{v.n_b}",
                 SHORT_VERDICT.get(v.verdict, v.verdict)]  # fmt: skip
        if len(label) > 22:  # the name on a line of its own, the numbers under it
            lines.append(label)
            cells[0] = ""
        lines.append(_table_line(cells))
        if r.absolute_shift:
            lines.append(f"{'':22} B-A: {r.absolute_shift}")
    lines.append("* primary metric; shift: B against A (Hodges-Lehmann), 95% CI;")
    lines.append("  p adj: adjusted for the metrics tested; runs: A/B")
    if hidden:
        rows_word = "row" if hidden == 1 else "rows"
        lines.append(f"  ({hidden} more {rows_word} without a meaningful change: see the report)")
    return lines


def shell_lines(commands: str, width: int = TABLE_WIDTH - 4) -> list[str]:
    """The reproducer's commands, each long one wrapped with backslash continuations (still
    one command when pasted into a shell); comments as they are."""
    out: list[str] = []
    for line in commands.splitlines():
        if line.startswith("#") or len(line) <= width:
            out.append(line)
            continue
        words: list[str] = []
        for w in shlex.split(line):  # an option and its value stay on one line
            if (
                words
                and words[-1].startswith("--")
                and " " not in words[-1]
                and not w.startswith("--")
            ):
                words[-1] += " " + shlex.quote(w)
            else:
                words.append(shlex.quote(w))
        current = words[0]
        for w in words[1:]:
            if len(current) + 1 + len(w) > width - 2:
                out.append(current + " \\")
                current = "    " + w
            else:
                current += " " + w
        out.append(current)
    return out


@dataclass(frozen=True)
class Links:
    report: str
    unsubscribe: str
    subscriptions: str


def comparison_body(
    h: Header, rows: Sequence[VerdictRow], kind: str, reproducer: str, links: Links, reason: str,
    *, diagnosis: int = 0, console: Sequence[ConsoleDifference] = (),
) -> str:  # fmt: skip
    """A comparison's alert: the verdict in words, the table, the kernel's complaints one
    side printed and the other never did (`console`), both kernels, the target, how to
    reproduce it, the report, where its traced diagnostic runs (`diagnosis` per side; 0:
    none asked for) say why, and how to stop these mails."""
    a, b = h.kernels
    t = h.target
    parts = [_para(verdict_sentence(h, rows, kind)), "", *verdict_table(rows), ""]
    if guards := guard_block(rows):
        parts += [*guards, ""]
    if console:
        parts += [*console_block(console), ""]
    parts.append("Kernels:")
    parts += [_kernel_block(k) for k in (a, b)]
    target = f"Target: {t.name} ({t.kind}, {t.arch}, {t.topology}, {t.memory_mb} MB)"
    parts.append(textwrap.fill(target, WIDTH, initial_indent="  ", subsequent_indent="          "))
    parts += ["", "Reproduce it with:", "", *(f"    {line}" for line in shell_lines(reproducer))]
    parts += ["", "Report, with figures and every run's console:", f"  {links.report}"]
    if diagnosis:
        parts += [f"Why: traced runs of both kernels, {diagnosis} per side, at",
                  f"  {links.report}#diagnosis"]  # fmt: skip
    parts += ["", *_footer(reason, links)]
    return "\n".join(parts) + "\n"


def guard_block(rows: Sequence[VerdictRow]) -> list[str]:
    """Each benchmark's guard line (webapp/comparisons/guards.py): what the primary's
    change cost, as the report shows it beside the primary; none without guards."""
    out = []
    for line in guard_lines(rows):
        out += textwrap.wrap(line.line, WIDTH,
                             subsequent_indent="    ", break_on_hyphens=False)  # fmt: skip
    return out


def console_block(diffs: Sequence[ConsoleDifference], limit: int = 10) -> list[str]:
    """The console differences as mail lines: each message with its run counts (a finding
    marked), then its first line as printed."""
    out = ["Console differences (printed by one side's kernel, never by the other's):"]
    for d in diffs[:limit]:
        mark = " [finding]" if d.finding else ""
        out += textwrap.wrap(f"{d.benchmark}: {d.text}{mark}", WIDTH,
                             initial_indent="  ", subsequent_indent="    ")  # fmt: skip
        out += textwrap.wrap(f"e.g. {d.example}", WIDTH, initial_indent="    ",
                             subsequent_indent="      ", break_on_hyphens=False)  # fmt: skip
    if len(diffs) > limit:
        out.append(f"  ... and {len(diffs) - limit} more in the report")
    return out


def command_answer_body(outcome: str, links: Links, reason: str) -> str:
    """The answer to a mail command: what was done, command by command (each quoted, then
    what came of it), and the commands there are."""
    parts = ["rcubench read your mail and did this:", "", outcome, "",
             "Commands (unquoted lines of a reply to an rcubench mail):",
             "  #rcubench ack | invalid: <why> | fix: <sha or subject> | dup: <message-id>",
             "  #rcubench rerun [runs=N] | bisect | test (a patch inline or attached)",
             "  #rcubench test git <branch of the same tree>", "",
             *_footer(reason, links)]  # fmt: skip
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class StateFacts:
    """A reported regression's move, as its report's thread is told it."""

    regression_id: int
    was: str
    now: str
    by: str  # who or what moved it, and through which door
    note: str
    fixed_by: str
    duplicate_of: str  # "regression N: <its page>", or ""
    regression_url: str


def state_body(f: StateFacts, links: Links, reason: str) -> str:
    """The short mail of a regression's later move, under the mail that reported it."""
    lines = [_para(f"Regression {f.regression_id} is {f.now} now (was {f.was}), moved by "
                   f"{f.by}."), ""]  # fmt: skip
    if f.fixed_by:
        lines.append(_para(f"Fixed by: {f.fixed_by}"))
    if f.duplicate_of:
        lines.append(_para(f"Duplicate of {f.duplicate_of}"))
    if f.note:
        lines += ["Note:", _para(f.note, "  ")]
    if lines[-1]:
        lines.append("")
    return "\n".join([*lines, "The regression, what was reported and its history of states:",
                      f"  {f.regression_url}", "", *_footer(reason, links)]) + "\n"  # fmt: skip


def _kernel_block(k: KernelFacts) -> str:
    """The kernel's name, then the full shas (once in the mail: the name has 12 digits)
    and the series' message-id, each on a line of its own for copying."""
    text = _para(f"{k.side}: {kernel_line(k)}", "  ")
    lines = text.splitlines()
    # Continuation lines under the text, not under "A:".
    lines = lines[:1] + ["     " + ln.strip() for ln in lines[1:]]
    if k.name.sha:
        lines.append(f"     commit {k.name.sha}")
    if k.series is not None:
        if k.series.message_id:
            lines.append(f"     series {k.series.message_id}")
        if k.sha:
            lines.append(f"     built as {k.sha} (the series applied)")
    if k.cmdline:
        lines.append(_para(f"kernel command line: {k.cmdline}", "     "))
    return "\n".join(lines)


def _footer(reason: str, links: Links) -> list[str]:
    return [
        "-- ",
        _para(f"rcubench, continuous benchmarking of RCU patches. You get this mail {reason}."),
        _para(
            "To stop all rcubench mail to this address, open this link (or let your "
            "mail client use the List-Unsubscribe header):"
        ),
        f"  {links.unsubscribe}",
        f"Your subscriptions: {links.subscriptions}",
    ]


@dataclass(frozen=True)
class ChangePointFacts:
    tree: str
    branch: str
    benchmark: str
    metric: str
    target: str
    sha: str
    before_median: float
    after_median: float
    change_pct: float
    regression: bool
    history_url: str


def change_point_subject(f: ChangePointFacts) -> str:
    word = "regression" if f.regression else "improvement"
    return (f"[rcubench] {f.tree}/{f.branch}: {f.benchmark} {f.metric} {f.change_pct:+.1f}% "
            f"change point ({word}) at {f.sha[:12]}")  # fmt: skip


def change_point_body(f: ChangePointFacts, links: Links, reason: str) -> str:
    word = "worse" if f.regression else "better"
    text = (
        f"rcubench found a change point in the history of {f.tree} {f.branch} on {f.target}: "
        f"{f.benchmark} {f.metric} moved by {f.change_pct:+.1f}% ({word}), from a median of "
        f"{f.before_median:.5g} to {f.after_median:.5g}, starting with the tested head "
        f"{f.sha[:12]}. A change point is found over many pushes' comparisons; the push "
        "named is the first tested head after the shift, not necessarily its cause."
    )
    return "\n".join([_para(text), "", "History of the branch:", f"  {f.history_url}", "",
                      *_footer(reason, links)]) + "\n"  # fmt: skip


def comparison_subject(
    h: Header, rows: Iterable[VerdictRow], kind: str, series_subject: str | None,
    console: Sequence[ConsoleDifference] = (),
) -> str:  # fmt: skip
    """`Re: <series subject>` for a series, else `[rcubench] tree/branch: metric +x.x% kind
    at <12-digit sha> ("<subject>")` (docs/alerts.md); a comparison mailed for a console
    finding alone names the message instead of a metric."""
    if series_subject:
        return reply_subject(series_subject)
    b = h.kernels[1]
    top = next((r for r in rows if r.verdict.verdict == kind), None)
    finding = next((d for d in console if d.finding and d.side == "B"), None)
    if top is None and finding is not None and h.verdict != "reliability-regression":
        change = f"{finding.benchmark}: new console message {finding.signature!r}"
    elif h.verdict == "reliability-regression" or top is None:
        what = ("kernel failure rate reliability regression"
                if h.verdict == "reliability-regression" else h.verdict)  # fmt: skip
        change = f"{','.join(h.benchmarks)}: {what}"
    else:
        v = top.verdict
        pct = f"{v.shift_pct:+.1f}%" if v.shift_pct is not None else (top.absolute_shift or "")
        change = f"{v.metric} {pct} {kind}"
    name = b.name
    return header_text(f"[rcubench] {name.where}: {change} at {name.commit or 'an unresolved ref'}")


# --- a bisection's confirmed culprit ------------------------------------------------------

LORE = "https://lore.kernel.org/r/"
ANSWER_TEXT = {"like-a": "like A", "like-b": "like B", "": "pending"}


@dataclass(frozen=True)
class StepFacts:
    """One step of a bisection: the commit at `position` (of n) tested by a comparison."""

    position: int
    kind: str  # bisect (against A), fresh (the culprit against its parent), revert
    answer: str  # like-a, like-b, unknown, skipped; "" while it runs
    shift: float | None  # the statistic's shift in the step's comparison, its unit
    ci_low: float | None
    ci_high: float | None
    comparison_url: str  # "" when the step has no comparison (not submitted, deleted)


@dataclass(frozen=True)
class CulpritFacts:
    """A bisection whose culprit was confirmed, and what the mail says of it."""

    bisection_id: int
    comparison_id: int
    benchmark: str
    metric: str
    statistic: str
    unit: str  # "%" (a relative shift) or the metric's unit (B - A)
    verdict: str  # the statistic's verdict in the original: regression or improvement
    effect: float
    effect_low: float
    effect_high: float
    position: int  # the culprit, 1..n
    n: int
    sha: str  # the commit; "" for a patch of a series
    subject: str
    author: str
    message_id: str  # a series patch's (its lore link); "" when not known
    summary: str  # the confirmation in words (Bisection.summary)
    steps: Sequence[StepFacts]  # in the order they ran
    comparison_url: str  # the original's report

    @property
    def label(self) -> str:
        """The culprit as the kernel names it: 12 digits of its sha, or its place in the
        series."""
        return self.sha[:12] if self.sha else f"patch {self.position}/{self.n}"


def lore_url(message_id: str) -> str:
    """The patch's mail on lore.kernel.org (its /r/ redirector finds the list); "" when
    `message_id` is not a well-formed one. A "/" in the id is escaped, as lore writes it."""
    ids = message_ids(message_id)
    if not ids:
        return ""
    return LORE + urllib.parse.quote(ids[0][1:-1], safe="@!$&'()*+,;=:~")


def shift_text(shift: float | None, unit: str) -> str:
    """`+9.90%` (the verdict table's form) or `+4096 KiB` (B - A in the metric's unit)."""
    if shift is None:
        return "n/a"
    return f"{shift:+.2f}%" if unit == "%" else f"{shift:+.6g} {unit}".rstrip()


def ci_text(low: float | None, high: float | None, unit: str) -> str:
    """`[+8.10, +11.70]` (in % points) or `[+1024, +8192]` (in the metric's unit)."""
    if low is None or high is None:
        return ""
    return f"[{low:+.2f}, {high:+.2f}]" if unit == "%" else f"[{low:+.6g}, {high:+.6g}]"


def effect_text(shift: float | None, low: float | None, high: float | None, unit: str) -> str:
    return " ".join(t for t in (shift_text(shift, unit), ci_text(low, high, unit)) if t)


# pos (9) step (7) answer (8) shift (12) CI (20) with one-space gaps: 60 columns, room for
# "+123456 KiB [-123456, +234567]"; each step's comparison on the line under it (a URL is
# never cut, nor pushed past 78).
_STEP_COLS = ((9, ">"), (7, "<"), (8, "<"), (12, ">"), (20, ">"))
_STEP_URL_INDENT = " " * 10


def step_table(steps: Sequence[StepFacts], n: int, unit: str) -> list[str]:
    """The bisection's steps in the order they ran, in verdict_table's fixed-width style."""

    def line(cells: Sequence[str]) -> str:
        parts = [f"{c:{a}{w}}" for c, (w, a) in zip(cells, _STEP_COLS, strict=True)]
        return " ".join(parts).rstrip()

    lines = [line(("pos", "step", "answer", "shift", "95% CI")),
             line(tuple("-" * w for w, _ in _STEP_COLS))]  # fmt: skip
    for s in steps:
        cells = (f"{s.position}/{n}", s.kind, ANSWER_TEXT.get(s.answer, s.answer),
                 shift_text(s.shift, unit), ci_text(s.ci_low, s.ci_high, unit))  # fmt: skip
        lines.append(line(cells))
        if s.comparison_url:
            lines.append(_STEP_URL_INDENT + s.comparison_url)
    lines.append(
        _para(
            "pos: the commit (or patch) tested, k of n; bisect: it against A; "
            "fresh: the culprit against its parent, run again; revert: head with the "
            "culprit reverted, against head (like B: it moved back). shift: the step's "
            "B against its A, 95% CI."
        )
    )
    return lines


def culprit_body(f: CulpritFacts, links: Links, reason: str) -> str:
    """A confirmed culprit, as a reply to the comparison's alert: the statistic and its
    original effect, the culprit and where to read it (lore for a patch, the sha for a
    commit), the confirmation, every step, the bisection's page (`links.report`), and how
    to stop these mails."""
    among = f"the series' {f.n} patches" if not f.sha else f"the {f.n} commits from A to B"
    effect = effect_text(f.effect, f.effect_low, f.effect_high, f.unit)
    opening = (
        f"rcubench bisected the {f.verdict} of {f.benchmark} {f.metric} ({f.statistic}) "
        f"in comparison #{f.comparison_id}, {effect} (B against A, 95% CI), to one of "
        f"{among}, and confirmed it:"
    )
    parts = [_para(opening), "", _para(f'{f.label} ("{f.subject}")', "  ")]
    if f.author:
        parts.append(_para(f"Author: {f.author}", "  "))
    if f.sha:
        parts.append(f"  commit {f.sha}")
    elif url := lore_url(f.message_id):
        parts.append(f"  {url}")
    parts += ["", _para(f.summary), ""]
    parts += ["The steps, each a comparison:", "", *step_table(f.steps, f.n, f.unit), ""]
    parts += ["The bisection, with every step:", f"  {links.report}"]
    parts += ["The comparison it bisected:", f"  {f.comparison_url}", ""]
    parts += _footer(reason, links)
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class SweepFacts:
    """A sweep whose B scales worse than A, and what its mail says of it."""

    sweep_id: int
    tree: str
    kernels: str  # "B against A" in words, as the point comparisons' header names them
    benchmark: str
    statistic: str  # "writer_duration p50"
    axis: str  # "vCPUs (log scale)", or the boot parameter
    sentence: str  # the sweep's verdict sentence (webapp/sweeps/summary.py)
    points: tuple[tuple[str, str, str], ...]  # (value, the point's verdict, its shift and CI)


def sweep_subject(f: SweepFacts) -> str:
    return header_text(f"[rcubench] {f.tree}: {f.benchmark} scales worse against {f.axis} "
                       f"(sweep #{f.sweep_id})", SUBJECT_MAX)  # fmt: skip


def sweep_body(f: SweepFacts, links: Links, reason: str) -> str:
    """B's primary grows faster than A's along the sweep's axis: the slopes and their
    ratio, every point with its own verdict, the sweep's page, and how to stop these mails."""
    parts = [
        _para(
            f"rcubench swept {f.kernels} on {f.benchmark} {f.statistic} against {f.axis}, "
            "and B scales worse than A:"
        ),
        "",
        _para(f.sentence, "  "),
        "",
        "Each point (a comparison of its own) and its verdict after Holm across them:",
        "",
        *(f"  {value:>12}  {verdict:<24} {shift}".rstrip() for value, verdict, shift in f.points),
        "",
        "The sweep, with both sides' curves:",
        f"  {links.report}",
        "",
        *_footer(reason, links),
    ]
    return "\n".join(parts) + "\n"
