"""The comparison design's defaults, in one place: the model's column defaults, the
submission service, the command line and the statistics engine all read them here.

Plain constants, importable from anywhere (no Django, no NumPy).
"""

# STATS.md: McKenney's rule for distributions of unknown shape. Fewer runs per side are
# refused by submission and by the engine (tests may allow fewer, see RCUBENCH_ALLOW_FEW_RUNS).
MIN_RUNS = 24
MAX_RUNS = 96  # per side, the last look
ALPHA = 0.05  # family-wise, over every metric and look (split by SECONDARY_SHARE)
THRESHOLD_PCT = 2.0  # the smallest change that counts as meaningful, in %
# The share of contended runs (host busy) may differ between the sides by this much before
# a regression/improvement verdict is held back (settings.RCUBENCH_CONTENTION_IMBALANCE).
CONTENTION_IMBALANCE = 0.1
# The share of ALPHA the secondary statistics spend (Benjamini-Hochberg; the primaries,
# Holm, get the rest): 20 unchanged metrics then give any false regression or improvement
# verdict at most ALPHA of the time over the whole procedure (STATS.md v2).
SECONDARY_SHARE = 0.1
