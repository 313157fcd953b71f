"""The bench worker's rule for which targets it serves (workers/serving.py), in plain Python;
the served-queue records and a live worker picking up a new target are tested in
webapp/comparisons/tests/test_serving.py."""

from workers.serving import bench_queues, serve_patterns


def test_patterns_are_the_setting_else_the_targets_the_worker_started_with():
    start = bench_queues(["control", "build", "bench.qemu-x86_64", "bench.lab-a"])
    assert start == {"bench.qemu-x86_64", "bench.lab-a"}
    assert serve_patterns(None, start) == ["lab-a", "qemu-x86_64"]
    assert serve_patterns(["qemu-*", " lab-power9 ", ""], start) == ["qemu-*", "lab-power9"]
    assert serve_patterns([], start) == []  # set but empty: it serves nothing
    assert not bench_queues(["control", "build", "analysis"])  # such a worker never serves
