"""Publish stage: one versioned, fingerprinted publication of a fit's artifacts, and the report built from it."""
