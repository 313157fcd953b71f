"""Kernel build engine: sources, patches, config, make, cache. Does not import Django."""
