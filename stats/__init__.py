"""rcubench's statistics: the run-level tests and intervals (methods), the A/B verdicts of a
comparison (verdicts), modality, calibration, change points and the defaults. Pure: arrays
and dataclasses in and out, no Django (docs/statistics.md is the method)."""
