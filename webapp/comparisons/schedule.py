"""The run schedule of a comparison: randomized ABBA blocks, benchmarks interleaved.

Pure (no Django): the orchestrator turns the slots into Run rows. A block is ABBA or BAAB
at random, so a drift in the host (thermal, a neighbour's load) falls on both sides alike
and no side always goes first.
"""

import random
from collections.abc import Sequence

Slot = tuple[str, str]  # (benchmark, side)


def abba_slots(benchmarks: Sequence[str], per_side: int, rng: random.Random) -> list[Slot]:
    """`per_side` new runs of each side for each benchmark, in the order they should run."""
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
    slots: list[Slot] = []
    for k in range(max(len(b) for b in blocks)):
        for own in blocks:
            if k < len(own):
                slots.extend(own[k])
    return slots
