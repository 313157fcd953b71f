"""The raw-data downloads of a comparison: CSV and JSON, streamed (a comparison can hold
2 x 96 runs x 10,000 samples)."""

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from typing import Any, cast

from webapp.comparisons import console_diff, guards
from webapp.comparisons.models import Comparison, Measurement
from webapp.comparisons.reliability import reliability_rows
from webapp.comparisons.reproducer import reproducer
from webapp.comparisons.summary import VerdictRow, header, report_url, verdict_rows

SAMPLE_COLUMNS = ("comparison_id", "benchmark", "metric", "unit", "side", "run_index",
                  "run_order", "run_result", "run_traced", "sample_index", "value")  # fmt: skip
# Measurements fetched per round trip while streaming an export (each up to 10,000 samples).
_EXPORT_CHUNK = 64


def _sample_rows(c: Comparison) -> Iterator[list[tuple[object, ...]]]:
    """Rows of SAMPLE_COLUMNS for every run's measurements (counted or not: run_result says
    which are data, and run_traced which are diagnostic runs, never data), one list per
    measurement, in run order."""
    rows = (
        Measurement.objects.filter(run__comparison=c)
        .order_by("run__order", "benchmark", "metric")
        .values_list("benchmark", "metric", "unit", "run__side", "run__index", "run__order",
                     "run__result", "run__traced", "samples")
    )  # fmt: skip
    for bench, metric, unit, side, index, order, result, traced, samples in rows.iterator(
        chunk_size=_EXPORT_CHUNK
    ):
        yield [
            (c.pk, bench, metric, unit, side, index, order, result, traced, i, v)
            for i, v in enumerate(samples)
        ]


class _Line:
    """A file-like sink for csv.writer that hands back what was written."""

    def write(self, text: str) -> str:
        return text


def csv_chunks(c: Comparison) -> Iterator[str]:
    """The raw samples as CSV (header first), one chunk per measurement."""
    writer = csv.writer(_Line(), lineterminator="\n")
    yield writer.writerow(SAMPLE_COLUMNS)
    for rows in _sample_rows(c):
        yield "".join(writer.writerow(row) for row in rows)


def verdict_dicts(rows: list[VerdictRow]) -> list[dict[str, object]]:
    """Each verdict row's columns, with how its p was obtained (p_method: exact, permutation
    or t-approximation, with p_permutations relabellings; None for rows stored before the
    engine recorded it). The sign test is in details["sign_test"]."""
    keys = ("benchmark", "metric", "statistic", "is_primary", "look", "n_a", "n_b", "median_a",
            "median_b", "shift_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_adjusted",
            "p_mannwhitney", "p_median", "prob_b_gt_a", "cliffs_delta", "verdict",
            "warnings", "details")  # fmt: skip
    return [
        {**{k: getattr(r.verdict, k) for k in keys}, "unit": r.unit,
         "p_method": r.p_method or None, "p_permutations": r.p_permutations}
        for r in rows
    ]  # fmt: skip


# Each benchmark's failure test stands alone (review 2026-11-26, item 10): said with its rows.
FAILURE_ADJUSTMENT = (
    "none: one test per benchmark at its own level, not adjusted across benchmarks (an "
    "exact test on these counts is conservative: its actual size is about 0.3-0.7%)"
)


def reliability_dicts(c: Comparison) -> list[dict[str, object]]:
    """Per benchmark: each side's attempts, ok, kernel failures (by outcome) and host
    failures, and the last failure-rate test (Boschloo one-sided p, Fisher's beside it,
    alpha, verdict; None and "" before the first)."""
    return [
        {"benchmark": r.benchmark, "a": asdict(r.sides[0]), "b": asdict(r.sides[1]),
         "p_value": r.p_value, "p_method": "exact" if r.p_value is not None else None,
         "test": "boschloo-exact, one-sided (B fails more often)", "p_fisher": r.p_fisher,
         "alpha": r.alpha, "adjustment": FAILURE_ADJUSTMENT, "verdict": r.verdict}
        for r in reliability_rows(c)
    ]  # fmt: skip


def summary(c: Comparison) -> dict[str, Any]:
    """What the comparison found, as JSON data (docs/api/README.md, "The summary"): its
    header, verdicts, guard lines, reliability rows, console differences, reproducer and
    report URL;
    the head of data.json, and what `compare --format json` prints. Datetimes as ISO 8601
    text, NaN and infinity as None."""
    rows = verdict_rows(c)  # the verdicts' and the guards' (one query)
    head = {
        "comparison": asdict(header(c)),
        "report_url": report_url(c),
        "verdicts": verdict_dicts(rows),
        "guards": guards.dicts(rows),
        "reliability": reliability_dicts(c),
        "console_differences": console_diff.dicts(c),
        "reproducer": reproducer(c),
    }
    return cast(dict[str, Any], json.loads(json.dumps(finite(head), default=_json_default)))


def json_chunks(c: Comparison, *, samples: bool = True) -> Iterator[str]:
    """The comparison as one JSON object: the summary, and the raw samples as
    {"columns": [...], "rows": [[...], ...]} (compact: millions of rows), streamed; without
    `samples`, the summary alone."""
    opening = json.dumps(summary(c), allow_nan=False)
    if not samples:
        yield opening
        return
    yield opening[:-1] + ', "samples": {"columns": ' + json.dumps(SAMPLE_COLUMNS) + ', "rows": ['
    first = True
    for rows in _sample_rows(c):
        if not rows:
            continue
        try:
            body = ",".join(json.dumps(row, allow_nan=False) for row in rows)
        except ValueError:  # NaN or infinity: not JSON, written as null
            body = ",".join(json.dumps(finite(row), allow_nan=False) for row in rows)
        yield body if first else "," + body
        first = False
    yield "]}}"


def finite(o: Any) -> Any:
    """`o` with every NaN or infinite float replaced by None (JSON has neither)."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [finite(v) for v in o]
    return o


def _json_default(o: object) -> object:
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")
