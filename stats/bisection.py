"""Bisection and per-patch attribution: which commit of A..B moved a statistic.

Pure: numbers in, answers out, no Django (webapp/bisections/ stores and schedules).

The commits between A and B are positions 1..n (a push range: its first-parent history,
oldest first; a series: its patches in order); position 0 is A, known "like A", and n is B,
known "like B". A step is a comparison of one position's kernel against A, decided by the
run-level engine like any comparison, and answered here from its row of the bisected
statistic:
  - like B: the step's CI lies wholly past the midpoint of A and B (half the original
    effect, in the original's direction);
  - like A: its CI lies wholly on A's side of that midpoint;
  - unknown: the CI holds the midpoint (the webapp extends the step to its maximum runs
    first; still unknown, the bisection stops and reports the range it has).
The midpoint, not zero, is the line: a step with many runs resolves a tiny real shift, and
a test of "differs from A" would then blame several commits for one change (Pinpoint's
four culprits for one). A position whose kernel does not build or boot is skipped: the
next candidate is the untried one nearest the middle, and when none is left the answer is
the range, with the reasons.

The gate: a statistic whose noise cannot resolve its own effect at a step's maximum runs
(the smallest detectable shift, scaled from the original's runs to the maximum, above the
effect) is not bisected: its steps would end unknown.

Confirmation: the culprit against its parent, run afresh, must be like B (of the
parent-to-culprit move, the original effect); head with the culprit reverted against head
must move back (like B of the opposite effect). Attribution: each patch's effect, its
prefix against its parent's, with the CI; a waterfall of them shows several culprits, or
patches that cancel.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LIKE_A = "like-a"
LIKE_B = "like-b"
UNKNOWN = "unknown"
SKIPPED = "skipped"  # did not build or boot: no answer about the statistic
ANSWERS = (LIKE_A, LIKE_B, UNKNOWN, SKIPPED)

CULPRIT = "culprit"  # one position, adjacent to a like-A one
RANGE = "range"  # several positions, with the reason the bisection could not narrow them


class NotBisectable(ValueError):
    """The statistic, or the comparison's result, gives a bisection nothing to find."""


@dataclass(frozen=True)
class Effect:
    """One statistic's change in a comparison, in its unit (% when relative): the
    Hodges-Lehmann shift and the repeated CI at the look where it ended."""

    shift: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Answer:
    answer: str
    reason: str


def step_answer(step: Effect, original: float) -> Answer:
    """Where `step` (a position against A) lies between A and B, whose effect was
    `original`: like A, like B or unknown, with the reason in words."""
    if original == 0 or not math.isfinite(original):
        raise NotBisectable(f"the original effect is {original}: nothing to bisect")
    if step.ci_low is None or step.ci_high is None:
        return Answer(UNKNOWN, "the step's statistic has no CI")
    half = original / 2
    # Flip the axis so that B's direction is up.
    low, high = sorted((step.ci_low * _sign(original), step.ci_high * _sign(original)))
    mid = abs(half)
    ci = f"[{step.ci_low:+.3g}, {step.ci_high:+.3g}]"
    if low > mid:
        return Answer(LIKE_B, f"CI {ci} past half the effect ({half:+.3g})")
    if high < mid:
        return Answer(LIKE_A, f"CI {ci} short of half the effect ({half:+.3g})")
    return Answer(UNKNOWN, f"CI {ci} holds half the effect ({half:+.3g})")


def _sign(x: float) -> float:
    return 1.0 if x > 0 else -1.0


@dataclass(frozen=True)
class Bracket:
    """What the answers so far say: the last position like A (`good`), the first like B
    (`bad`), the positions between them that were skipped, and the one answered unknown
    (None: none)."""

    good: int
    bad: int
    skipped: tuple[int, ...]
    unknown: int | None
    inconsistent: str  # "" unless a like-A position lies past a like-B one

    @property
    def untried(self) -> list[int]:
        return [p for p in range(self.good + 1, self.bad) if p not in self.skipped]


def bracket(n: int, answers: Mapping[int, str]) -> Bracket:
    """The bracket of positions 1..n (0 is A, like A; n is B, like B) given `answers`
    ({position: answer})."""
    _check(n, answers)
    likes_a = [p for p, a in answers.items() if a == LIKE_A]
    likes_b = [p for p, a in answers.items() if a == LIKE_B]
    good = max([0, *likes_a])
    bad = min([n, *likes_b])
    inconsistent = ""
    if good >= bad:  # a later commit like A after an earlier one like B: not one step
        inconsistent = (f"position {good} is like A but position {bad} before it is like B: "
                        "the change is not one step between A and B")  # fmt: skip
        good, bad = 0, n
    inside = range(good + 1, bad)
    skipped = tuple(p for p in inside if answers.get(p) == SKIPPED)
    unknown = next((p for p in inside if answers.get(p) == UNKNOWN), None)
    return Bracket(good, bad, skipped, unknown, inconsistent)


def _check(n: int, answers: Mapping[int, str]) -> None:
    if n < 1:
        raise NotBisectable("no commits between A and B")
    for p, a in answers.items():
        if not 1 <= p <= n:
            raise ValueError(f"position {p} is outside 1..{n}")
        if a not in ANSWERS:
            raise ValueError(f"unknown answer {a!r} at position {p}")


def max_steps(n: int) -> int:
    """Step comparisons a bisection of n positions may run before confirmation:
    ceil(log2 n) + 1 (one more than a clean binary search, for one skip or unknown)."""
    return math.ceil(math.log2(n)) + 1 if n > 1 else 1


def next_position(n: int, answers: Mapping[int, str]) -> int | None:
    """The position to test next, or None when the answers say all they can (a culprit,
    or a range). The middle of the bracket; where it was skipped, the untried position
    nearest the middle (the lower one on a tie)."""
    b = bracket(n, answers)
    if b.inconsistent or b.unknown is not None or sum(1 for _ in answers) >= max_steps(n):
        return None
    untried = b.untried
    if not untried or b.bad - b.good == 1:
        return None
    middle = (b.good + b.bad) / 2
    return min(untried, key=lambda p: (abs(p - middle), p))


@dataclass(frozen=True)
class Outcome:
    kind: str  # CULPRIT or RANGE
    first: int  # the range's first position (a culprit: first == last)
    last: int
    reason: str  # why a range is not one commit; "" for a culprit


def outcome(
    n: int, answers: Mapping[int, str], reasons: Mapping[int, str] | None = None
) -> Outcome:
    """What the answers found once `next_position` has nothing more: the culprit, or the
    range of positions it lies in and why it is no narrower. `reasons`: why each skipped
    position was skipped (the build or boot that failed), quoted in the range's reason."""
    reasons = reasons or {}
    b = bracket(n, answers)
    if b.inconsistent:
        return Outcome(RANGE, 1, n, b.inconsistent)
    if b.bad - b.good == 1:
        return Outcome(CULPRIT, b.bad, b.bad, "")
    why = []
    if b.unknown is not None:
        why.append(f"the step of position {b.unknown} could not tell A from B at its "
                   "maximum runs")  # fmt: skip
    for p in b.skipped:
        why.append(f"position {p} was skipped: {reasons.get(p, 'did not build or boot')}")
    if not why:
        why.append(f"the step budget ({max_steps(n)} comparisons) was spent")
    return Outcome(RANGE, b.good + 1, b.bad, "; ".join(why))


def gate(effect: Effect, smallest_detectable: float | None, n_a: int, n_b: int,
         max_runs: int) -> str:  # fmt: skip
    """Why the statistic is not bisected ("" if it may be): no CI to place a step by, or
    noise that cannot resolve the effect at a step's maximum runs. `smallest_detectable`:
    the original's smallest detectable shift at its runs (n_a, n_b), in the effect's unit;
    scaled by the rank test's sqrt(1/n_a + 1/n_b) to max_runs per side."""
    if effect.ci_low is None or effect.ci_high is None:
        return "the statistic has no CI (its size is not estimated): a step cannot be placed"
    if not math.isfinite(effect.shift) or effect.shift == 0:
        return f"the effect is {effect.shift}: nothing to bisect"
    if smallest_detectable is None or not math.isfinite(smallest_detectable):
        return "the original stored no smallest detectable shift (no spread between runs)"
    at_max = smallest_detectable * math.sqrt((2 / max_runs) / (1 / n_a + 1 / n_b))
    # The rule. A step's CI half-width is about 0.7 of this figure (z of alpha/2
    # over z of alpha/2 plus z of the power), so below the effect it also resolves half of
    # it for a commit like A or like B.
    if at_max > abs(effect.shift):
        return (
            f"too noisy to bisect: at {max_runs} runs per side a step could detect "
            f"{at_max:.3g}, more than the effect ({abs(effect.shift):.3g})"
        )
    return ""


@dataclass(frozen=True)
class Confirmation:
    confirmed: bool
    text: str


def confirmation(fresh: Answer, revert: Answer | None, revert_reason: str = "") -> Confirmation:
    """Whether the culprit is confirmed: its fresh re-run against its parent like B, and
    head with it reverted moved back (like B of the opposite effect). A revert that does
    not apply (`revert` None, `revert_reason` why) leaves the re-run alone to confirm, and
    the text says so."""
    if fresh.answer != LIKE_B:
        return Confirmation(False, f"not confirmed: the re-run against its parent was "
                            f"{fresh.answer} ({fresh.reason})")  # fmt: skip
    if revert is None:
        return Confirmation(
            True,
            "confirmed by a fresh re-run against its parent "
            f"({fresh.reason}); the revert was not tried: {revert_reason}",
        )
    if revert.answer != LIKE_B:
        return Confirmation(False, "not confirmed: reverting it from head did not undo the "
                            f"effect ({revert.answer}: {revert.reason})")  # fmt: skip
    return Confirmation(True, f"confirmed: the re-run against its parent ({fresh.reason}) and "
                        f"the revert from head ({revert.reason})")  # fmt: skip


@dataclass(frozen=True)
class Bar:
    """One patch's bar in the attribution waterfall."""

    position: int
    effect: Effect | None  # None: its step ended without a row (build failed, cancelled)
    start: float  # the sum of the effects before it
    beyond_threshold: bool  # its CI lies wholly outside +-threshold
    excludes_zero: bool


def waterfall(effects: Sequence[Effect | None], threshold: float) -> list[Bar]:
    """The waterfall of per-patch effects (position 1 first): each bar starts where the
    ones before it ended. Effects are added as they are (in % they compound, but at the
    sizes a waterfall is read at, the sum is within rounding of the product)."""
    bars, total = [], 0.0
    for i, e in enumerate(effects, start=1):
        if e is None or e.ci_low is None or e.ci_high is None:
            bars.append(Bar(i, e, total, False, False))
            if e is not None:
                total += e.shift
            continue
        beyond = e.ci_low > threshold or e.ci_high < -threshold
        excludes = e.ci_low > 0 or e.ci_high < 0
        bars.append(Bar(i, e, total, beyond, excludes))
        total += e.shift
    return bars
