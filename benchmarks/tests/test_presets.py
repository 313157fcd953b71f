"""Presets (benchmarks/presets.py): reviewed rcuscale variants, each a benchmark of its own
that keeps its base's build, parser and metrics, ends its run and is refused outside the
reviewed table."""

import pytest

from benchmarks import presets
from benchmarks.cmdline import CmdlineError, check_extra, params
from benchmarks.guest import RCUSCALE_WINDOW
from benchmarks.presets import Preset, derive, preset_errors
from benchmarks.registry import (
    BENCHMARKS,
    describe_presets,
    find,
    get,
    preset_params,
    presets_of,
    variant_of,
)
from benchmarks.sync_rcu_latency import parser as sync_rcu_parser
from benchmarks.sync_rcu_latency.spec import SPEC

PRESETS = [b.spec for b in BENCHMARKS.values() if b.spec.preset]


def _preset(**overrides: str) -> Preset:
    fields = {"name": "more", "description": "more writers", "params": "rcuscale.nwriters=4",
              "reviewed": "because"}  # fmt: skip
    return Preset(**{**fields, **overrides})  # type: ignore[arg-type]


def _settings(cmdline: str) -> dict[str, str]:
    return {p.name: p.value or "" for p in params(cmdline)}


def test_the_presets_are_the_reviewed_ones_each_under_a_name_of_its_own():
    assert {s.name: preset_params(s) for s in PRESETS} == {
        "sync-rcu-latency--many-writers": "rcuscale.nwriters=16",
        "sync-rcu-latency--writer-holdoff": "rcuscale.writer_holdoff=1000",
        "sync-rcu-latency-exp": "rcuscale.gp_exp=1",  # the name it had before presets
        "sync-rcu-latency-exp--many-writers": "rcuscale.nwriters=16",
    }
    assert [s.preset for s in presets_of("sync-rcu-latency")] == [
        "many-writers", "writer-holdoff", "expedited",
    ]  # fmt: skip


@pytest.mark.parametrize("spec", PRESETS, ids=lambda s: s.name)
def test_a_preset_is_its_base_with_its_parameters_and_still_ends_its_run(spec):
    base = BENCHMARKS[spec.base]
    # One build serves both, the same parser reads both, the same metrics come out.
    assert (spec.kconfig, spec.guest_command, spec.archs) == (
        base.spec.kconfig, base.spec.guest_command, base.spec.archs,
    )  # fmt: skip
    assert get(spec.name).parse is base.parse is sync_rcu_parser.parse
    # but expedited writers, over before init reads, have no rcuscale window (spec.py)
    window = {m.name for m in RCUSCALE_WINDOW} if "rcuscale.gp_exp=1" in spec.cmdline else set()
    assert [m.name for m in spec.metrics] == [
        m.name for m in base.spec.metrics if m.name not in window
    ]
    own, theirs = _settings(spec.cmdline), _settings(base.spec.cmdline)
    assert own["rcuscale.shutdown"] == "1"  # rcuscale powers the guest off: the run ends
    assert own["rcuscale.holdoff"] == theirs["rcuscale.holdoff"]
    assert own["rcuscale.nreaders"] == theirs["rcuscale.nreaders"] == "0"
    changed = {k for k in own if own[k] != theirs.get(k)}
    assert changed
    assert changed <= set(presets.REVIEWED)
    assert len(spec.cmdline.split()) == len(own)  # no parameter given twice


def test_a_derived_name_says_its_base_and_preset():
    spec = get("sync-rcu-latency--many-writers").spec
    assert (spec.base, spec.preset) == ("sync-rcu-latency", "many-writers")
    assert presets.split(spec.name) == ("sync-rcu-latency", "many-writers")
    assert presets.split("sync-rcu-latency-exp-load") is None
    assert "preset many-writers: 16 writer kthreads" in spec.description
    assert "writer i % CPUs" in spec.notes or "CPU i % CPUs" in spec.notes


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"params": "rcuscale.shutdown=0"}, "rcuscale.shutdown is not a parameter a preset"),
        ({"params": "rcuscale.gp_async=1"}, "rcuscale.gp_async is not a parameter a preset"),
        ({"params": "rcuscale.holdoff=30"}, "rcuscale.holdoff is not a parameter a preset"),
        ({"params": "rcubench.bench=x"}, "rcubench.bench is not a parameter a preset"),
        ({"params": "rcuscale.nwriters=200"}, r"nwriters=200: not a whole number in \[1, 32\]"),
        ({"params": "rcuscale.nwriters=0"}, r"nwriters=0: not a whole number in \[1, 32\]"),
        ({"params": "rcuscale.nwriters=-1"}, r"nwriters=-1: not a whole number"),
        ({"params": "rcuscale.nwriters=1"}, "sets nothing its base does not already set"),
        ({"params": "rcuscale.nwriters=2 rcuscale.nwriters=4"}, "a parameter is set twice"),
        ({"params": "rcuscale.nwriters"}, "'rcuscale.nwriters' is not name=value"),
        ({"params": ""}, "sets at least one parameter"),
        ({"name": "many--writers"}, "lowercase words joined by single dashes"),
        ({"name": "Many"}, "lowercase words joined by single dashes"),
        ({"reviewed": ""}, "why its values were reviewed"),
    ],
)  # fmt: skip
def test_a_preset_outside_the_reviewed_table_is_refused(overrides, message):
    preset = _preset(**overrides)
    with pytest.raises(ValueError, match=message):
        derive(SPEC, preset)


def test_only_an_rcuscale_benchmark_that_powers_off_has_presets():
    assert "not an rcuscale benchmark" in " ".join(preset_errors(get("boot-time").spec,
                                                                 _preset()))  # fmt: skip
    derived = derive(SPEC, _preset())
    assert "a preset of a preset" in " ".join(preset_errors(derived, _preset(name="again")))


def test_an_unknown_preset_of_a_known_benchmark_lists_its_presets():
    with pytest.raises(KeyError) as refused:
        get("sync-rcu-latency--nwriters-200")
    message = refused.value.args[0]
    assert message.startswith("benchmark sync-rcu-latency has no preset 'nwriters-200'; ")
    assert "sync-rcu-latency--many-writers (rcuscale.nwriters=16)" in message
    assert "sync-rcu-latency-exp (rcuscale.gp_exp=1)" in message
    with pytest.raises(KeyError, match="unknown benchmark 'nope--many-writers'; known: "):
        get("nope--many-writers")


def test_free_rcuscale_values_stay_refused_and_the_refusal_names_the_presets():
    for extra in ("rcuscale.nwriters=200", "rcuscale.writer_holdoff=5", "rcuscale.gp_async=1"):
        with pytest.raises(CmdlineError) as refused:
            check_extra(extra, [SPEC])
        assert describe_presets() in str(refused.value)
    # A preset's own parameters are its own, as a benchmark's are.
    with pytest.raises(CmdlineError, match=r"rcuscale\.writer_holdoff is set by the benchmark "
                                           r"sync-rcu-latency--writer-holdoff itself"):  # fmt: skip
        check_extra("rcuscale.writer_holdoff=1", [get("sync-rcu-latency--writer-holdoff").spec])


# --- a sweep's variants (presets.variant, registry.find) -----------------------------------


def test_every_sweepable_parameter_is_a_reviewed_one_and_presets_sweep_nothing():
    sweepable = {b.spec.name: b.spec.sweepable for b in BENCHMARKS.values() if b.spec.sweepable}
    assert sweepable == {
        "sync-rcu-latency": ("rcuscale.nwriters", "rcuscale.writer_holdoff",
                             "rcuscale.writer_holdoff_jiffies"),
        "sync-rcu-latency-exp": ("rcuscale.nwriters",),
    }  # fmt: skip
    assert {p for ps in sweepable.values() for p in ps} <= set(presets.REVIEWED)
    assert set(presets.REVIEWED) >= presets.COUNTS


@pytest.mark.parametrize(
    ("name", "sets"),
    [
        ("sync-rcu-latency--nwriters-4", "rcuscale.nwriters=4"),
        ("sync-rcu-latency--writer-holdoff-250", "rcuscale.writer_holdoff=250"),
        ("sync-rcu-latency--writer-holdoff-jiffies-2", "rcuscale.writer_holdoff_jiffies=2"),
        ("sync-rcu-latency-exp--nwriters-32", "rcuscale.nwriters=32"),
    ],
)
def test_a_variant_is_found_by_its_name_and_is_its_base_with_one_value(name, sets):
    found = find(name)
    assert found is not None
    assert get(name) == found
    spec, base = found.spec, BENCHMARKS[found.spec.base]
    assert found.parse is base.parse
    assert preset_params(spec) == sets
    assert _settings(spec.cmdline)["rcuscale.shutdown"] == "1"
    assert (spec.kconfig, spec.sweepable) == (base.spec.kconfig, ())
    # Its jiffy alignment was not measured: the tail share is a secondary.
    assert not any(m.tail_share_primary for m in spec.metrics)


@pytest.mark.parametrize(
    "name",
    [
        "sync-rcu-latency--nwriters-1",  # the base's own value: that is sync-rcu-latency
        "sync-rcu-latency--nwriters-16",  # that is the preset many-writers
        "sync-rcu-latency--writer-holdoff-0",  # rcuscale's default: sync-rcu-latency
        "sync-rcu-latency--nwriters-04",  # one name per value
        "sync-rcu-latency--nwriters-33",  # beyond the reviewed bounds
        "sync-rcu-latency--nwriters-0",
        "sync-rcu-latency--gp-exp-1",  # reviewed, but not sweepable here
        "sync-rcu-latency-exp--writer-holdoff-100",
        "sync-rcu-latency--many-writers--nwriters-4",  # no variant of a preset
        "boot-time--nwriters-4",
        "sync-rcu-latency--nwriters-4 ",
    ],
)
def test_a_name_that_is_no_variant_is_not_found(name):
    assert find(name) is None
    with pytest.raises(KeyError):
        get(name)


def test_variant_of_names_each_configuration_once():
    assert variant_of("sync-rcu-latency", "rcuscale.nwriters", 1).name == "sync-rcu-latency"
    assert variant_of("sync-rcu-latency", "rcuscale.nwriters", 16).name == (
        "sync-rcu-latency--many-writers")  # fmt: skip
    assert variant_of("sync-rcu-latency", "rcuscale.nwriters", 8).name == (
        "sync-rcu-latency--nwriters-8")  # fmt: skip
    with pytest.raises(ValueError, match=r"does not sweep 'rcuscale\.gp_exp'"):
        variant_of("sync-rcu-latency", "rcuscale.gp_exp", 1)
    with pytest.raises(ValueError, match=r"rcuscale.writer_holdoff=10001: not a whole number"):
        variant_of("sync-rcu-latency", "rcuscale.writer_holdoff", 10_001)
