"""Benchmarks: one script per workload, each runnable as `python -m benchmarks.<name>`."""
