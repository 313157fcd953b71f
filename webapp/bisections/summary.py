"""What a bisection found, as the front ends show it: its positions (a range's commits or a
series' patches) each with the steps that tested it, the culprit or the range, and for an
attribution the waterfall's bars. One read model under the bisection page, the REST API and
`./manage.py bisect` (as webapp/comparisons/summary.py is for a comparison): they name a
position, an effect and a step the same way.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.urls import reverse

from stats import bisection as rules
from webapp.bisections.models import Bisection, BisectionState, Step
from webapp.comparisons.reproducer import public_url

# The step comparisons' columns a summary shows (their state while they run, their verdict).
STEP_COMPARISON_COLUMNS = ("comparison__id", "comparison__state", "comparison__result",
                           "comparison__verdict", "comparison__error_code")  # fmt: skip


def label(b: Bisection, position: int) -> str:
    """A position as people name it: a commit's 12-digit sha, or "patch k/n" of a series."""
    sha = b.commits[position - 1].get("sha", "")
    return sha[:12] if sha else f"patch {position}/{b.n}"


def effect_text(shift: float | None, low: float | None, high: float | None, unit: str) -> str:
    """`+9.90% [+8.10, +11.70]`, or `+0.512 ms [+0.1, +0.9]` for an absolute effect."""
    if shift is None:
        return "n/a"
    text = f"{shift:+.2f}%" if unit == "%" else f"{shift:+.4g} {unit}".rstrip()
    if low is not None and high is not None:
        text += f" [{low:+.2f}, {high:+.2f}]" if unit == "%" else f" [{low:+.4g}, {high:+.4g}]"
    return text


def step_effect(step: Step, unit: str) -> str:
    """A step's shift and CI, in the bisection's unit ("" before it has one)."""
    return "" if step.shift is None else effect_text(step.shift, step.ci_low, step.ci_high, unit)


def url(b: Bisection) -> str:
    """The bisection page, as others reach it (links in the API and the command line)."""
    return public_url() + reverse("reports:bisection", args=[b.pk])


def threshold(b: Bisection) -> float:
    """The waterfall's +-line: the comparison's practical threshold for an effect in %; an
    absolute effect has no % line (0: a bar counts once its CI excludes zero)."""
    return b.comparison.threshold_pct if b.unit == "%" else 0.0


def waterfall_bars(b: Bisection, steps: Sequence[Step]) -> list[rules.Bar]:
    """An attribution's bars, position 1 first (stats.bisection.waterfall): each patch's
    measured effect against its parent, or a gap where its step has none (yet)."""
    by_position = {s.position: s for s in steps if s.kind == Step.Kind.PATCH}
    effects = []
    for p in range(1, b.n + 1):
        s = by_position.get(p)
        effects.append(None if s is None or s.shift is None
                       else rules.Effect(s.shift, s.ci_low, s.ci_high))  # fmt: skip
    return rules.waterfall(effects, threshold(b))


@dataclass(frozen=True)
class Position:
    """One commit or patch of the bisected range, with the steps that tested it."""

    position: int
    label: str  # 12-digit sha, or "patch k/n"
    sha: str  # "" for a patch of a series
    subject: str
    author: str
    link: str  # a patch's message-id
    steps: tuple[Step, ...] = ()
    culprit: bool = False  # the one commit the bisection found (confirmed or not)
    in_range: bool = False  # within the range it found (the culprit's own position too)


@dataclass(frozen=True)
class BisectionSummary:
    bisection: Bisection
    positions: list[Position]
    steps: list[Step]  # in the order they were made
    bars: list[rules.Bar] = field(default_factory=list)  # an attribution's; [] for a bisection
    threshold: float = 0.0

    @property
    def done(self) -> bool:
        return self.bisection.state == BisectionState.DONE

    @property
    def original_effect(self) -> str:
        b = self.bisection
        return effect_text(b.effect, b.effect_low, b.effect_high, b.unit)

    @property
    def statistic(self) -> str:
        b = self.bisection
        return f"{b.benchmark} {b.metric} ({b.statistic})"

    @property
    def culprit(self) -> Position | None:
        return next((p for p in self.positions if p.culprit), None)

    @property
    def confirmation(self) -> list[Step]:
        """The culprit's confirming steps: re-run against its parent, reverted from head."""
        kinds = (Step.Kind.FRESH, Step.Kind.REVERT)
        return [s for s in self.steps if s.kind in kinds]

    @property
    def steps_needed(self) -> int:
        """At most this many step comparisons before confirmation (stats.bisection)."""
        b = self.bisection
        if b.mode == Bisection.Mode.ATTRIBUTE:
            return b.n
        return rules.max_steps(b.n) if b.n > 0 else 0

    @property
    def answered(self) -> int:
        return sum(1 for s in self.steps if s.answer)


def steps_of(b: Bisection) -> QuerySet[Step]:
    """The bisection's steps in the order they were made, with what is shown of their
    comparisons."""
    return (
        b.steps.select_related("comparison")
        .only("bisection", "kind", "position", "answer", "reason", "shift", "ci_low",
              "ci_high", "extended", "created_at", "answered_at", *STEP_COMPARISON_COLUMNS)
        .order_by("created_at", "pk")
    )  # fmt: skip


def summarize(b: Bisection) -> BisectionSummary:
    """The bisection's summary from its row (with its comparison) and one query of steps."""
    steps = list(steps_of(b))
    by_position: dict[int, list[Step]] = {}
    for s in steps:
        by_position.setdefault(s.position, []).append(s)
    found = b.outcome in (Bisection.Outcome.CULPRIT, Bisection.Outcome.UNCONFIRMED)
    first, last = b.first, b.last if b.last is not None else b.first
    positions = [
        Position(
            position=p, label=label(b, p), sha=c.get("sha", ""), subject=c.get("subject", ""),
            author=c.get("author", ""), link=c.get("link", ""),
            steps=tuple(by_position.get(p, ())), culprit=found and p == b.first,
            in_range=first is not None and last is not None and first <= p <= last,
        )
        for p, c in enumerate(b.commits, start=1)
    ]  # fmt: skip
    if b.mode != Bisection.Mode.ATTRIBUTE:
        return BisectionSummary(b, positions, steps)
    return BisectionSummary(b, positions, steps, waterfall_bars(b, steps), threshold(b))
