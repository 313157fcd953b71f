"""rcubench's kernel benchmarks, one folder each; pure Python, no Django."""
