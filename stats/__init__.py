"""rcubench's statistics: the two-sample tests and estimates (methods: the run-level rank
tests, intervals and failure rates; tails; diagnostics; sequential: multiplicity and the
boundaries), the A/B verdict engine (inputs, battery, design, verdicts: analyse in battery
runs it), modality, calibration, change points and the defaults. Pure: arrays and
dataclasses in and out, no Django (docs/statistics.md is the method)."""
