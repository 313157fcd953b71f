"""Comparisons of two kernels, their runs on targets, and the measurements the runs produce."""
