"""Outputs stage: difficulty bounds, reliability grades, the dimensionality test and cell predictions, from one fit."""
