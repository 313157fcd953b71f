import pytest

from benchmarks.spec import BenchmarkSpec, Better, Kind, Metric


def _spec(**overrides):
    fields = {
        "name": "sync-rcu-latency",
        "description": "synchronize_rcu() latency from rcuscale",
        "kconfig": ("CONFIG_RCU_SCALE_TEST=y", "CONFIG_NR_CPUS=8"),
        "cmdline": "rcuscale.nwriters=1",
        "guest_command": "",
        "metrics": (
            Metric("writer_duration", "ms", Better.LOWER, Kind.SAMPLES, primary=True),
            Metric("gp_kthread_cpu", "ms", Better.LOWER, Kind.VALUE),
        ),
    }
    return BenchmarkSpec(**{**fields, **overrides})


def test_valid_spec_exposes_its_primary_metric():
    spec = _spec()
    assert spec.primary.name == "writer_duration"
    assert spec.metric("gp_kthread_cpu").kind is Kind.VALUE
    with pytest.raises(KeyError, match="no metric 'nope'"):
        spec.metric("nope")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": "Sync RCU"}, "name must be lowercase"),
        ({"kconfig": ("RCU_SCALE_TEST=y",)}, "not of the form CONFIG_X=value"),
        ({"metrics": ()}, "no metrics"),
        (
            {"metrics": (Metric("a", "ms", Better.LOWER, Kind.VALUE),)},
            "exactly one primary metric required, found none",
        ),
        (
            {
                "metrics": (
                    Metric("a", "ms", Better.LOWER, Kind.VALUE, primary=True),
                    Metric("a", "ms", Better.LOWER, Kind.VALUE),
                )
            },
            "duplicate metric names: ['a']",
        ),
        (
            {"metrics": (Metric("a", "", Better.LOWER, Kind.VALUE, primary=True),)},
            "has no unit",
        ),
        ({"archs": ("arm64",)}, "unknown archs: ['arm64']"),
    ],
)
def test_invalid_specs_are_refused_with_every_reason(overrides, message):
    with pytest.raises(ValueError, match="benchmark spec") as exc:
        _spec(**overrides)
    assert message in str(exc.value)
