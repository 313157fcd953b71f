"""Fragment parsing, merging and the check that every requested option survived."""

import pytest

from engine.build import kconfig
from engine.build.arch import profile


def test_parse_reads_set_and_unset_options_and_refuses_anything_else():
    assert kconfig.parse('CONFIG_A=y\n# CONFIG_B is not set\n# comment\n\nCONFIG_C="x y"\n') == {
        "CONFIG_A": "y",
        "CONFIG_B": "n",
        "CONFIG_C": '"x y"',
    }
    with pytest.raises(kconfig.ConfigError, match="line 2: 'RCU_SCALE_TEST=y'"):
        kconfig.parse("CONFIG_A=y\nRCU_SCALE_TEST=y\n")


def test_merge_puts_benchmark_lines_after_the_base_and_later_lines_win():
    arch = profile("x86_64")
    merged = kconfig.parse(kconfig.merge(arch, ["CONFIG_RCU_SCALE_TEST=y", "CONFIG_HZ_1000=n"]))
    assert merged["CONFIG_RCU_SCALE_TEST"] == "y"
    assert merged["CONFIG_HZ_1000"] == "n"  # the benchmark's value overrides the base
    assert merged["CONFIG_SLUB_TINY"] == "n"


def test_the_config_hash_covers_arch_and_every_option():
    x86, ppc = profile("x86_64"), profile("ppc64le")
    a = kconfig.config_hash(x86, kconfig.merge(x86, []))
    assert a == kconfig.config_hash(x86, kconfig.merge(x86, []))
    assert a != kconfig.config_hash(x86, kconfig.merge(x86, ["CONFIG_BPF_SYSCALL=y"]))
    assert a != kconfig.config_hash(ppc, kconfig.merge(x86, []))


def test_dropped_options_names_each_with_what_was_asked_and_what_came_out():
    requested = {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": "64", "CONFIG_D": "y"}
    final = {"CONFIG_A": "y", "CONFIG_B": "y", "CONFIG_C": "8"}
    assert [str(d) for d in kconfig.dropped_options(requested, final)] == [
        "CONFIG_B (requested n, got y)",
        "CONFIG_C (requested 64, got 8)",
        "CONFIG_D (requested y, got n)",
    ]


def test_unknown_arch_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown arch 'arm64'; known: x86_64, ppc64le"):
        profile("arm64")


@pytest.mark.parametrize("arch", ["x86_64", "ppc64le"])
def test_the_default_configs_tick_at_1000_hz_and_a_benchmark_line_wins(arch):
    # The jiffy statistics of sync-rcu-latency take a jiffy's length from this.
    base = kconfig.merge(profile(arch), ["CONFIG_RCU_SCALE_TEST=y"])
    assert kconfig.hz(kconfig.parse(base)) == 1000
    other = kconfig.merge(profile(arch), ["# CONFIG_HZ_1000 is not set", "CONFIG_HZ_250=y"])
    assert kconfig.hz(kconfig.parse(other)) == 250


def test_hz_prefers_config_hz_and_is_none_when_the_config_names_none():
    assert kconfig.hz({"CONFIG_HZ_1000": "y", "CONFIG_HZ": "300"}) == 300
    assert kconfig.hz({"CONFIG_HZ_100": "n", "CONFIG_RCU_SCALE_TEST": "y"}) is None
