"""Benchmark scripts (speed and quality figures; never part of the test gate)."""
