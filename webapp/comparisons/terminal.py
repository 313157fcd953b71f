"""The verdict table as `./manage.py compare` prints it, fit to a terminal's width.

Where every column fits, one line per verdict; else each verdict takes two: the metric
with its verdict, and its numbers indented under it (the alert mail's shape). Either way
the cross-checks (primary metrics), B - A for metrics with an absolute threshold, and the
warnings are wrapped under their row, never beside it: a warning is a sentence, and a
column of sentences made the table hundreds of columns wide. No line is longer than the
width, except a URL, which is never broken (it would no longer open).
"""

import shutil
import textwrap
from collections.abc import Sequence

from webapp.comparisons.guards import guard_lines
from webapp.comparisons.summary import VerdictRow, p_method_legend

DEFAULT_WIDTH = 80  # a pipe, a file, a CI log
MIN_WIDTH = 40
GAP = "  "
NOTE = " " * 4
HEADER = ("metric", "stat", "A median", "B median", "shift [95% CI]", "p", "p adj", "verdict")
NUMBERS = slice(2, 7)  # the columns of the second line, when a row takes two


def width() -> int:
    """The terminal's columns: $COLUMNS when set, else the terminal's own, else 80."""
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _cells(r: VerdictRow) -> tuple[str, ...]:
    v = r.verdict
    return (f"{v.benchmark}/{v.metric}{' *' if v.is_primary else ''}", v.statistic,
            f"{r.median_a} {r.unit}".strip(), f"{r.median_b} {r.unit}".strip(),
            f"{r.shift} {r.ci}".strip(), f"{r.p_value} {r.p_marker}".strip(), r.p_adjusted,
            v.verdict)  # fmt: skip


def _notes(r: VerdictRow) -> list[str]:
    # The sign test and Mood's p: the cross-checks the kernel lists quote, for primary
    # metrics only (--format json has them for every row).
    notes = []
    if r.verdict.is_primary and r.cross_checks:
        notes.append(f"cross-checks: {r.cross_checks}")
    if r.absolute_shift:
        notes.append(f"B - A: {r.absolute_shift}")
    notes += [f"warning: {w}" for w in r.verdict.warnings]
    return notes


def _line(cells: Sequence[str], widths: Sequence[int], indent: str = "") -> str:
    return indent + GAP.join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def wrap(text: str, width: int, indent: str = "", hang: str = "  ") -> list[str]:
    """`text` in lines of at most `width` (a word longer than that is cut, a URL is not)."""
    lines = []
    for word_line in textwrap.wrap(text, width, initial_indent=indent,
                                   subsequent_indent=indent + hang, break_on_hyphens=False,
                                   break_long_words=False):  # fmt: skip
        if len(word_line) <= width or "://" in word_line:
            lines.append(word_line)
        else:  # a long word that is not a URL (a path, a sha): cut it
            lines += textwrap.wrap(word_line, width, subsequent_indent=indent + hang)
    return lines


def verdict_table(
    rows: Sequence[VerdictRow], verdict: str, url: str, width: int, kernels: tuple[str, str]
) -> list[str]:
    """The table, each benchmark's guard line, the p markers' legend, the kernels as people
    name them (tree/branch, short sha, subject) and the verdict line, in lines of at most
    `width`."""
    cells = [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in (HEADER, *cells)) for i in range(len(HEADER))]
    one_line = len(_line(HEADER, widths)) <= width
    lines: list[str] = []
    if rows and one_line:
        lines.append(_line(HEADER, widths))
    elif rows:
        name_width = max(len(f"{c[0]} {c[1]}") for c in (HEADER, *cells))
        name_width = name_width if name_width + len(GAP) + widths[-1] <= width else 0
        lines += [_line(("metric stat", "verdict"), (name_width, 0)),
                  _line(HEADER[NUMBERS], widths[NUMBERS], "  ")]  # fmt: skip
    for r, c in zip(rows, cells, strict=True):
        if one_line:
            lines.append(_line(c, widths))
        else:
            lines.append(_line((f"{c[0]} {c[1]}", c[-1]), (name_width, 0)))
            lines.append(_line(c[NUMBERS], widths[NUMBERS], "  "))
        for note in _notes(r):
            lines += wrap(note, width, NOTE)
    for guard in guard_lines(rows):  # what the change cost, under the rows
        lines += wrap(guard.line, width, hang="    ")
    legend = p_method_legend(list(rows))
    if legend:
        lines += wrap(f"p: {legend}", width, hang="   ")
    lines += [f"A: {kernels[0]}", f"B: {kernels[1]}"]
    last = f"verdict: {verdict or '(none)'}   report: {url}"
    lines += [last] if len(last) <= width else [f"verdict: {verdict or '(none)'}", f"report: {url}"]
    # A row too wide even on two lines (a very narrow terminal): wrapped, never cut off.
    return [piece for line in lines for piece in (
        wrap(line, width, hang="    ") if len(line) > width and "://" not in line else [line]
    )]  # fmt: skip
