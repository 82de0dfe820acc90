"""Helpers of bench/cleaning_bench.py: corpus building, running the systems, labels and scoring."""
