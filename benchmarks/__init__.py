"""Benchmarks, one script per question (see README.md here): `python3 tasks.py bench NAME`, or
`python -m benchmarks.NAME` from the project root. What they share is in `tests/harness/bench/`."""
