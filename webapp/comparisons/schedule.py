"""The run schedule of a comparison: randomized ABBA blocks, benchmarks interleaved.

Pure (no Django): the orchestrator turns the slots into Run rows. A block is ABBA or BAAB
at random, so a drift in the host (thermal, a neighbour's load) falls on both sides alike
and no side always goes first.
"""

import random
from collections.abc import Sequence

Slot = tuple[str, str]  # (benchmark, side)


def abba_blocks(benchmarks: Sequence[str], per_side: int, rng: random.Random) -> list[list[Slot]]:
    """`per_side` new runs of each side for each benchmark as ABBA (or BAAB) blocks, in the
    order they should run."""
    if per_side < 1:
        raise ValueError(f"per_side must be >= 1, got {per_side}")
    blocks: list[list[list[Slot]]] = []
    for bench in benchmarks:
        own = []
        for start in range(0, per_side, 2):
            sides: tuple[str, ...] = (
                ("A", "B", "B", "A") if rng.random() < 0.5 else ("B", "A", "A", "B")
            )
            if per_side - start == 1:  # an odd count ends with one AB or BA pair
                sides = sides[:2]
            own.append([(bench, side) for side in sides])
        blocks.append(own)
    # Round-robin over benchmarks, one block at a time, so each sees the same time span.
    return [own[k] for k in range(max(len(b) for b in blocks)) for own in blocks if k < len(own)]


def abba_slots(benchmarks: Sequence[str], per_side: int, rng: random.Random) -> list[Slot]:
    """`per_side` new runs of each side for each benchmark, in the order they should run."""
    return [slot for block in abba_blocks(benchmarks, per_side, rng) for slot in block]


def interleave(
    members: Sequence[Sequence[list[Slot]]], rng: random.Random
) -> list[tuple[int, Slot]]:
    """The blocks of several comparisons run as one schedule (a sweep's points: one pair of
    kernels on several targets or command lines), as (member index, slot): round k holds
    every member's k-th block, the members in a fresh random order each round. So no member
    runs after another, and a drift in the host falls on every member alike."""
    order: list[tuple[int, Slot]] = []
    for k in range(max((len(m) for m in members), default=0)):
        round_ = [i for i, m in enumerate(members) if k < len(m)]
        rng.shuffle(round_)
        for i in round_:
            order.extend((i, slot) for slot in members[i][k])
    return order


Replacement = tuple[str, str, int | None]  # (benchmark, side, which failed run it replaces)


def replacement_pairs(failed: Sequence[Slot], rng: random.Random) -> list[list[Replacement]]:
    """Fresh AB or BA pairs (the half-block the schedule ends an odd count with) for the
    replacements of failed runs, so a replacement runs beside a run of the other side
    instead of alone at the end. failed[i] is the slot of the i-th run to replace; in the
    output a replacement carries i, an extra run of the other side None. An A and a B
    replacement of one benchmark share a pair; a lone one gets the extra run."""
    pairs: list[list[Replacement]] = []
    for bench in dict.fromkeys(b for b, _ in failed):
        todo = {s: [i for i, slot in enumerate(failed) if slot == (bench, s)] for s in "AB"}
        for k in range(max(len(todo["A"]), len(todo["B"]))):
            pair: list[Replacement] = [
                (bench, s, todo[s][k] if k < len(todo[s]) else None) for s in "AB"
            ]
            if rng.random() < 0.5:
                pair.reverse()
            pairs.append(pair)
    return pairs
