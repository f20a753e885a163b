"""Benchmarks: `python3 tasks.py bench [store|history|bridge|distributed]`, or `python -m benchmarks.NAME` from the project root."""
