"""A benchmark the report has never heard of: registered for the test only, it gets its
page section, its declared figure, its units and its downloads with no change to
webapp/reports/, which knows benchmarks only through the registry and their specs."""

import ast
import csv
import io
import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from benchmarks import registry, spec
from benchmarks.registry import Benchmark
from tests.support.factories import (
    ComparisonFactory,
    MeasurementFactory,
    MetricVerdictFactory,
    RunFactory,
)

pytestmark = pytest.mark.django_db

QUEUED = (10, 100, 1000)  # callbacks queued per CPU: the toy's sweep
TOY = spec.BenchmarkSpec(
    name="toy-callbacks",
    description="a toy: callback backlog while flooding call_rcu()",
    kconfig=(),
    cmdline="rcubench.bench=toy-callbacks",
    guest_command="toy-callbacks",
    metrics=(
        spec.Metric("flood_us", "us", spec.Better.LOWER, spec.Kind.SAMPLES, primary=True),
        *(
            spec.Metric(f"backlog_kb_q{q}", "KiB", spec.Better.LOWER, spec.Kind.VALUE)
            for q in QUEUED
        ),
    ),
    figures=(
        spec.FigureSpec(
            title="toy-callbacks: backlog against the callbacks queued",
            x=QUEUED,
            x_label="callbacks queued per CPU",
            y_label="callback backlog (KiB)",
            lines=(spec.FigureLine("backlog", "backlog_kb_q{x}", dash="dot"),),
            x_name="queued",
        ),
    ),
)
_LINE = re.compile(r"^toy (\w+)=([0-9.]+)$", re.MULTILINE)


def parse_toy(console: str, ctx: spec.RunContext) -> spec.Parsed:
    """`toy flood_us=12.5` lines (repeatable) and `toy backlog_kb_q10=64` lines."""
    parsed: dict[str, list[float]] = {}
    for name, value in _LINE.findall(console):
        parsed.setdefault(name, []).append(float(value))
    if not parsed:
        raise spec.ParseError("toy-callbacks: no toy lines")
    return {name: tuple(values) for name, values in parsed.items()}


def _console(side: str, i: int) -> str:
    extra = 8.0 if side == "B" else 0.0
    lines = [f"toy flood_us={20.0 + k + i}" for k in range(5)]
    lines += [f"toy backlog_kb_q{q}={q / 10 + extra + i}" for q in QUEUED]
    return "booting...\n" + "\n".join(lines) + "\nRCUBENCH-DONE\n"


@pytest.fixture
def toy(monkeypatch):
    """The toy in the registry for this test: BENCHMARKS is the one dict every lookup by
    name reads (registry.get, the analysis, the submission, the report)."""
    bench = Benchmark(TOY, parse_toy)
    monkeypatch.setitem(registry.BENCHMARKS, TOY.name, bench)
    return bench


@pytest.fixture
def toy_comparison(toy):
    """Three ok runs per side measured by the toy's own parser, and two verdicts whose
    details carry no unit (the report takes it from the spec)."""
    c = ComparisonFactory.create(benchmarks=[TOY.name], state="done", result="ok",
                                 verdict="regression")  # fmt: skip
    order = 0
    for i in range(3):
        for side in "AB":
            console = _console(side, i)
            run = RunFactory.create(comparison=c, benchmark=TOY.name, side=side, index=i,
                                    order=order, state="done", result="ok",
                                    console_log=console)  # fmt: skip
            order += 1
            parsed = toy.measure(console, spec.RunContext(wall_seconds=30.0, ready_seconds=2.0))
            for name, samples in parsed.items():
                unit = TOY.metric(name).unit
                MeasurementFactory.create(run=run, benchmark=TOY.name, metric=name, unit=unit,
                                          samples=list(samples))  # fmt: skip
    for metric, statistic, primary, verdict in [
        ("flood_us", "p50", True, "no-meaningful-change"),
        ("backlog_kb_q100", "value", False, "regression"),
    ]:
        MetricVerdictFactory.create(
            comparison=c, benchmark=TOY.name, metric=metric, statistic=statistic,
            is_primary=primary, verdict=verdict, median_a=21.0, median_b=29.0,
            details={"relative": True},
        )  # fmt: skip
    return c


def test_the_report_draws_the_figure_the_toy_declares(client, toy_comparison):
    html = client.get(reverse("reports:comparison", args=[toy_comparison.pk])).content.decode()
    section = html[html.index('id="figures-toy-callbacks"') :]
    section = section[: section.index("</section>")]
    assert TOY.description in section
    # The declared sweep first, then flood_us (ECDF, per-run p50, mean and p90, histogram:
    # it has samples), then each backlog (ECDF, per-run value).
    assert section.count('class="plotly-graph-div"') == 1 + 5 + 2 * len(QUEUED)
    first = section[: section.index("<h3>")]
    for text in (
        "toy-callbacks: backlog against the callbacks queued",  # title, axes, legend, hover
        "callbacks queued per CPU",
        "callback backlog (KiB)",
        "A backlog (median, IQR band)",
        "B backlog (median, IQR band)",
        "queued %{x}: median %{y:.6g} KiB",
    ):
        assert text in first
    assert '"dash":"dot"' in first.replace(" ", "")
    assert re.findall(r"<h3>(\w+) ", section) == ["flood_us", *(f"backlog_kb_q{q}" for q in QUEUED)]
    # Verdicts with the spec's units, the primary metric first, then the regression.
    rows = re.findall(r'data-verdict="([^"]+)" data-metric="([^"]+)"', html)
    assert rows == [("no-meaningful-change", "toy-callbacks/flood_us/p50"),
                    ("regression", "toy-callbacks/backlog_kb_q100/value")]  # fmt: skip
    assert "21 KiB" in html
    assert "29 us" in html


def test_the_downloads_carry_the_toys_samples_and_units(client, toy_comparison):
    c = toy_comparison
    response = client.get(reverse("reports:comparison-csv", args=[c.pk]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    # 6 runs x (5 flood samples + one backlog value per queue depth)
    assert len(rows) == 6 * (5 + len(QUEUED))
    assert {r["benchmark"] for r in rows} == {TOY.name}
    backlog = [r for r in rows if r["metric"] == "backlog_kb_q1000" and r["side"] == "B"]
    assert [float(r["value"]) for r in backlog] == [108.0, 109.0, 110.0]
    assert {r["unit"] for r in backlog} == {"KiB"}

    response = client.get(reverse("reports:comparison-json", args=[c.pk]))
    data = json.loads(b"".join(response.streaming_content))
    assert data["comparison"]["benchmarks"] == [TOY.name]
    assert [(v["metric"], v["unit"]) for v in data["verdicts"]] == [
        ("flood_us", "us"), ("backlog_kb_q100", "KiB")
    ]  # fmt: skip
    assert len(data["samples"]["rows"]) == len(rows)
    assert "--bench toy-callbacks" in data["reproducer"]


def test_the_report_names_no_benchmark():
    """webapp/reports/ reads benchmarks through benchmarks.registry and benchmarks.spec
    only, and its code and templates name none: a new benchmark needs no change here."""
    root = Path(__file__).resolve().parents[1]
    sources = [p for p in root.rglob("*") if p.suffix in (".py", ".html")
               and "tests" not in p.relative_to(root).parts]  # fmt: skip
    assert {p.name for p in sources} >= {"pages.py", "sections.py", "figures.py", "comparison.html"}
    for path in sources:
        text = path.read_text()
        for name in registry.BENCHMARKS:
            assert name not in text, f"{path.name} names the benchmark {name}"
        if path.suffix != ".py":
            continue
        tree = ast.parse(text)
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}  # fmt: skip
        imported |= {f"{node.module}.{alias.name}" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) for alias in node.names}  # fmt: skip
        from_benchmarks = {m for m in imported if m.startswith("benchmarks.")}
        allowed = ("benchmarks.registry", "benchmarks.spec")
        assert all(m.startswith(allowed) for m in from_benchmarks), (path.name, from_benchmarks)
