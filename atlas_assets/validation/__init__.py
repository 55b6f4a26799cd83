"""Validation: held-out splits, refits without the held-out data, baselines on identical splits, and their metrics."""
