"""Kernel sources: trees, patch series, revisions and the builds made from them."""
