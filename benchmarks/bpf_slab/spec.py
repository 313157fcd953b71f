"""bpf-slab: sock_inode_cache slab memory under UDP socket churn and BPF map-in-map updates.

Sockets are freed through RCU and each map-in-map update frees the replaced inner map
after a grace period, so slow or starved grace periods show up as slab growth. The guest
program (guest/bpf-slab.c) sweeps the delay between map updates over DELAYS_MS, one step
of STEP_MS each, sampling /proc/slabinfo every 100 ms; `slab_nomerge` keeps
sock_inode_cache from being merged into another cache's line.
"""

from benchmarks.guest import WINDOW
from benchmarks.spec import (
    RCUSCALE_IDLE,
    BenchmarkSpec,
    Better,
    FigureLine,
    FigureSpec,
    Kind,
    Metric,
)

DELAYS_MS = (0, 1, 2, 5, 10)
STEP_MS = 3000
SOCK_THREADS = 15

SPEC = BenchmarkSpec(
    name="bpf-slab",
    description=(
        f"sock_inode_cache kB while {SOCK_THREADS} threads churn UDP sockets and a "
        f"map-in-map is updated with delays {', '.join(map(str, DELAYS_MS))} ms"
    ),
    kconfig=("CONFIG_BPF_SYSCALL=y",),
    cmdline=(
        f"rcubench.bench=bpf-slab slab_nomerge {RCUSCALE_IDLE} "
        f"rcubench.sock_threads={SOCK_THREADS} rcubench.map_threads=1 rcubench.map_type=hash "
        f"rcubench.delays={','.join(map(str, DELAYS_MS))} rcubench.step_ms={STEP_MS} "
        "rcubench.sample_ms=100"
    ),
    guest_command="bpf-slab",
    metrics=(
        *(
            Metric(
                f"slab_kb_peak_d{d}",
                "kB",
                Better.LOWER,
                Kind.VALUE,
                primary=d == 0,
                threshold=64.0,
                threshold_is_absolute=True,
            )
            for d in DELAYS_MS
        ),
        *(
            Metric(
                f"slab_kb_mean_d{d}",
                "kB",
                Better.LOWER,
                Kind.VALUE,
                threshold=64.0,
                threshold_is_absolute=True,
            )
            for d in DELAYS_MS
        ),
        *(Metric(f"update_rate_d{d}", "1/s", Better.HIGHER, Kind.VALUE) for d in DELAYS_MS),
        *WINDOW,
    ),
    figures=(
        FigureSpec(
            title="bpf-slab: sock_inode_cache slab against the map-update delay",
            x=DELAYS_MS,
            x_label="delay between map-in-map updates (ms)",
            y_label="sock_inode_cache slab (kB)",
            lines=(
                FigureLine("peak", "slab_kb_peak_d{x}", dash="solid"),
                FigureLine("mean", "slab_kb_mean_d{x}", dash="dash"),
            ),
            x_name="delay",
            x_unit="ms",
        ),
    ),
)
