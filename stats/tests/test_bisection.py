"""Bisection rules (stats/bisection.py): the tri-state step, the midpoint choice, skips and
ranges, the gate, confirmation and the attribution waterfall."""

import math

import pytest

from stats import bisection as b
from stats.bisection import LIKE_A, LIKE_B, SKIPPED, UNKNOWN, Answer, Effect


def run(n: int, oracle: dict[int, str]) -> tuple[b.Outcome, list[int]]:
    """Bisect 1..n, answering each tested position from `oracle` (default: like B from
    the culprit on, else like A)."""
    answers: dict[int, str] = {}
    tested = []
    while (p := b.next_position(n, answers)) is not None:
        tested.append(p)
        answers[p] = oracle[p]
    return b.outcome(
        n, answers, {p: "make failed" for p, a in answers.items() if a == SKIPPED}
    ), tested


def clean(n: int, culprit: int) -> dict[int, str]:
    return {p: LIKE_B if p >= culprit else LIKE_A for p in range(1, n + 1)}


@pytest.mark.parametrize("n", range(1, 40))
def test_every_culprit_is_found_within_ceil_log2_n_steps(n):
    for culprit in range(1, n + 1):
        found, tested = run(n, clean(n, culprit))
        assert (found.kind, found.first) == (b.CULPRIT, culprit)
        assert len(tested) <= math.ceil(math.log2(n)) if n > 1 else not tested
        assert len(tested) <= b.max_steps(n)


def test_six_patches_planted_third_takes_three_steps_the_middle_first():
    found, tested = run(6, clean(6, 3))
    assert tested == [3, 1, 2]
    assert found == b.Outcome(b.CULPRIT, 3, 3, "")


def test_a_patch_that_does_not_build_is_skipped_and_the_answer_is_the_range_naming_it():
    oracle = clean(6, 3) | {2: SKIPPED}  # patch 2 breaks the build, patch 3 fixes it
    found, tested = run(6, oracle)
    assert tested == [3, 1, 2]
    assert (found.kind, found.first, found.last) == (b.RANGE, 2, 3)
    assert "position 2 was skipped: make failed" in found.reason


def test_a_skipped_midpoint_moves_to_the_nearest_untried_position():
    assert b.next_position(8, {4: SKIPPED}) == 3  # 3 and 5 are as near: the lower
    assert b.next_position(8, {4: SKIPPED, 3: SKIPPED}) == 5


def test_an_unknown_step_stops_the_bisection_with_the_range():
    found, tested = run(8, clean(8, 6) | {4: LIKE_A, 6: UNKNOWN})
    assert tested == [4, 6]
    assert (found.kind, found.first, found.last) == (b.RANGE, 5, 8)
    assert "position 6 could not tell A from B" in found.reason


def test_a_like_a_commit_after_a_like_b_one_is_not_one_step():
    found = b.outcome(6, {3: LIKE_B, 5: LIKE_A})
    assert (found.kind, found.first, found.last) == (b.RANGE, 1, 6)
    assert b.next_position(6, {3: LIKE_B, 5: LIKE_A}) is None


def test_the_step_budget_ends_a_bisection_that_keeps_skipping():
    answers = {p: SKIPPED for p in (8, 7, 9)}
    assert b.max_steps(16) == 5
    answers |= {6: SKIPPED, 10: SKIPPED}
    assert b.next_position(16, answers) is None
    assert "budget" not in b.outcome(16, answers).reason  # the skips are the reason
    assert "position 6 was skipped" in b.outcome(16, answers).reason


@pytest.mark.parametrize(
    ("step", "original", "answer"),
    [
        (Effect(16.0, 14.0, 18.0), 16.0, LIKE_B),
        (Effect(0.3, -1.0, 1.5), 16.0, LIKE_A),
        # A real but small shift (its CI excludes 0) is still like A: half is the line.
        (Effect(2.0, 1.0, 3.0), 16.0, LIKE_A),
        (Effect(8.0, 3.0, 13.0), 16.0, UNKNOWN),
        # An improvement: B's direction is down.
        (Effect(-10.0, -12.0, -8.0), -10.0, LIKE_B),
        (Effect(-1.0, -2.0, 0.5), -10.0, LIKE_A),
        # The revert of a +16% culprit: expected -16%.
        (Effect(-15.0, -17.0, -13.0), -16.0, LIKE_B),
        (Effect(0.0, -1.0, 1.0), -16.0, LIKE_A),
        (Effect(16.0, None, None), 16.0, UNKNOWN),
    ],
)
def test_a_step_is_placed_by_its_ci_against_half_the_effect(step, original, answer):
    assert b.step_answer(step, original).answer == answer


def test_a_step_without_an_effect_to_place_against_is_refused():
    with pytest.raises(b.NotBisectable):
        b.step_answer(Effect(1, 0, 2), 0.0)


def test_the_gate_refuses_noise_that_cannot_resolve_the_effect_at_max_runs():
    effect = Effect(4.0, 2.0, 6.0)
    # 24 v 24 runs could detect 6%: at 96 per side, 3%, under the effect.
    assert b.gate(effect, 6.0, 24, 24, 96) == ""
    # 24 v 24 could detect 10%: at 96, 5%, more than the effect.
    assert "too noisy to bisect" in b.gate(effect, 10.0, 24, 24, 96)
    assert "no CI" in b.gate(Effect(4.0, None, None), 3.0, 24, 24, 96)
    assert "smallest detectable" in b.gate(effect, None, 24, 24, 96)


def test_a_culprit_is_confirmed_by_its_rerun_and_its_revert():
    yes, no = Answer(LIKE_B, "past half"), Answer(LIKE_A, "short of half")
    assert b.confirmation(yes, yes).confirmed
    assert not b.confirmation(no, yes).confirmed
    assert not b.confirmation(yes, no).confirmed
    alone = b.confirmation(yes, None, "patch 4 does not apply without it")
    assert alone.confirmed
    assert "revert was not tried: patch 4 does not apply" in alone.text


def test_the_waterfall_stacks_each_patch_on_the_ones_before_it():
    bars = b.waterfall([Effect(0.1, -0.5, 0.7), Effect(16, 14, 18), None,
                        Effect(-0.2, -0.9, 0.4)], threshold=2.0)  # fmt: skip
    assert [bar.start for bar in bars] == [0, 0.1, 16.1, 16.1]
    assert [bar.beyond_threshold for bar in bars] == [False, True, False, False]
    assert [bar.excludes_zero for bar in bars] == [False, True, False, False]
