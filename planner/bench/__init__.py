"""Benchmark harness: measure real inference, import results, feed calibration."""
