"""Fingerprints: what a published number depends on.

The specification fingerprint hashes every file that defines how data become estimates
(SQL stages, the Stan program, the package's YAML configuration); the data hash is the
sha256 of the modeled observations in a canonical order. A fit is named by both, so an
unchanged input and specification reuses the fit, and publishing can refuse a mismatch.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from atlas_assets.settings import CONFIG_DIR, SQL_DIR, STAN_DIR


def specification_files() -> list:
    return sorted([*SQL_DIR.glob("*.sql"), *STAN_DIR.glob("*.stan"), *CONFIG_DIR.glob("*.yaml")])


def specification_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in specification_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def frame_hash(frame: pd.DataFrame, order_by: list[str]) -> str:
    """sha256 of a frame's CSV rendering, rows sorted by `order_by`, columns in their given order."""
    canonical = frame.sort_values(order_by, kind="mergesort").reset_index(drop=True)
    return hashlib.sha256(canonical.to_csv(index=False, float_format="%.12g").encode()).hexdigest()
