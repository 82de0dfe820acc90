"""Watching a training run: metrics beyond the loss, detectors with verdicts, sinks, sample diffs, dashboard."""
from .monitor import Monitor, NullMonitor

__all__ = ["Monitor", "NullMonitor"]
