"""Statistical analysis of comparisons: the pure engine and the services that store verdicts."""
