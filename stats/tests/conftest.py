"""Inputs and the design shared by the engine's tests (test_verdicts.py, test_battery.py)."""

import math

import numpy as np
import pytest

from stats.design import Design
from stats.inputs import MetricInput, RunSamples
from stats.verdicts import StatResult


def _value_runs(rng, n, median, cv, first_order):
    return [RunSamples(first_order + 2 * i, (float(rng.lognormal(math.log(median), cv)),))
            for i in range(n)]  # fmt: skip


def _metric(rng, n=24, shift=0.0, cv=0.05, name="kernel_to_init_ms", primary=True, **kw):
    return MetricInput(
        benchmark=kw.pop("benchmark", "boot-time"), name=name, unit="ms",
        per_run_samples=False, lower_is_better=kw.pop("lower_is_better", True),
        primary=primary, runs_a=_value_runs(rng, n, 1000.0, cv, 0),
        runs_b=_value_runs(rng, n, 1000.0 * (1 + shift), cv, 1), **kw,
    )  # fmt: skip


def _design(**kw):
    """The default design with fewer permutations, to keep the tests quick."""
    return Design(n_perm=1999, n_boot=500, n_perm_shape=199, **kw)


def _num(r: StatResult, key: str) -> float:
    """A number from a result's details (typed object there)."""
    v = r.details[key]
    assert isinstance(v, int | float)
    return float(v)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _values(a, b, *, lower_is_better=True):
    """boot-time kernel_to_init_ms (primary) from one value per run."""
    return MetricInput(
        "boot-time", "kernel_to_init_ms", "ms", False, lower_is_better, True,
        [RunSamples(2 * i, (float(v),)) for i, v in enumerate(a)],
        [RunSamples(2 * i + 1, (float(v),)) for i, v in enumerate(b)],
    )  # fmt: skip
