"""Validation stage: refits of the production specification without held-out data, scored against baselines on identical splits."""
