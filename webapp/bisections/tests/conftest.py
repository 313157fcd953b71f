"""The whole-comparison fixtures (webapp/comparisons/tests/conftest.py) for the end-to-end
bisection: the x86_64 target and the settings of the real worker processes."""

from webapp.comparisons.tests.conftest import env, x86_target

__all__ = ["env", "x86_target"]
