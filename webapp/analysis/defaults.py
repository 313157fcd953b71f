"""The comparison design's defaults, in one place: the model's column defaults, the
submission service, the command line and the statistics engine all read them here.

Plain constants, importable from anywhere (no Django, no NumPy).
"""

# STATS.md: McKenney's rule for distributions of unknown shape. Fewer runs per side are
# refused by submission and by the engine (tests may allow fewer, see RCUBENCH_ALLOW_FEW_RUNS).
MIN_RUNS = 24
MAX_RUNS = 96  # per side, the last look
ALPHA = 0.05  # family-wise, over the primary metrics and every look
THRESHOLD_PCT = 2.0  # the smallest change that counts as meaningful, in %
# The share of contended runs (host busy) may differ between the sides by this much before
# a regression/improvement verdict is held back (settings.RCUBENCH_CONTENTION_IMBALANCE).
CONTENTION_IMBALANCE = 0.1
