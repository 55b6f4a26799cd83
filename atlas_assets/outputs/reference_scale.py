"""A frozen reference scale (issue 12; seed 004 §05-06, §14): scores of any later fit on the display units of a
reference version, so a model's number moves mainly when its own results change.

Why: the fit's own display map is fixed by two anchor states (model.yaml `display.reference`), re-estimated by
every fit. A new benchmark or new models move the anchors' latent positions, and with them every score. A
reference version instead freezes (a) the latent position of the benchmark families — the posterior means of
their difficulty b and discrimination beta in the reference fit — and (b) one affine map from that latent scale
to display units. A later fit is linked onto it per posterior draw by mean-sigma linking on the difficulties of
the families both fits measured well (Kolen & Brennan, Test Equating, Scaling, and Linking, ch. 6):

    theta_ref = A_d + B_d * theta_d,   B_d = sd(b_ref) / sd(b_d),   A_d = mean(b_ref) - B_d * mean(b_d)

over the shared families; display = c0 + c1 * theta_ref. For the reference fit itself c0, c1 are chosen so that
its scores keep their anchored display units on average (the adoption of a reference does not move the
numbers), and linking a draw to the frozen means removes the part of the scale's uncertainty that the anchors
carried (the anchors' own intervals stop being zero by construction). New families are simply not in the link:
they are placed on the frozen scale through the linked draws. A rebase is a new version: `conversion` gives the
old->new display map (both are affine in the latent scale, linked through the two versions' shared families), and
`conversion_table` the conversions a publication carries (from the last good publication's version when the scale
changed since, and from every other frozen version).

The reference files live in atlas_assets/config/reference_scales/<version>.yaml (publication scope of the
fingerprint); `python -m atlas_assets.outputs.reference_scale freeze --version V [--fit DIR]` writes one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from atlas_assets import settings

LINK_METHOD = "mean_sigma"


class ReferenceScaleError(ValueError):
    """A reference file is missing or malformed, or a fit cannot be linked to it (too few shared families)."""


@dataclass(frozen=True)
class ReferenceScale:
    version: str
    created_on: str
    fit: str
    display_offset: float      # c0: display = c0 + c1 * theta_ref
    display_scale: float       # c1
    min_family_obs: int        # a family links only when both fits have at least this many observations of it
    families: pd.DataFrame     # family, b, beta, n_obs (latent, the reference fit's posterior means)
    path: Path | None = None

    def as_document(self) -> dict:
        return {
            "version": self.version, "created_on": self.created_on, "fit": self.fit,
            "display": {"offset": round(self.display_offset, 6), "scale": round(self.display_scale, 6)},
            "linking": {"method": LINK_METHOD, "min_family_obs": self.min_family_obs},
            "families": {row.family: {"b": round(float(row.b), 6), "beta": round(float(row.beta), 6),
                                      "n_obs": int(row.n_obs)} for row in self.families.itertuples()},
        }


def reference_path(version: str, directory: Path | None = None) -> Path:
    return Path(directory or settings.reference_scale_dir()) / f"{version}.yaml"


def load_reference(version: str, directory: Path | None = None) -> ReferenceScale:
    """The reference version's file, validated; errors name the file and the field."""
    path = reference_path(version, directory)
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.exists() else []
        raise ReferenceScaleError(f"{path}: reference scale {version!r} does not exist (known: {known}); "
                                  f"freeze one with `python -m atlas_assets.outputs.reference_scale freeze --version {version}`")
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ReferenceScaleError(f"{path}: not valid YAML: {error}") from error

    def field(*keys):
        node = document
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                raise ReferenceScaleError(f"{path}: field {'.'.join(keys)!r} is missing")
            node = node[key]
        return node

    if str(field("version")) != version:
        raise ReferenceScaleError(f"{path}: field 'version' is {field('version')!r}, the file name says {version!r}")
    if field("linking", "method") != LINK_METHOD:
        raise ReferenceScaleError(f"{path}: field 'linking.method' is {field('linking', 'method')!r}; only "
                                  f"{LINK_METHOD!r} is implemented")
    rows = []
    for family, values in (field("families") or {}).items():
        try:
            rows.append({"family": family, "b": float(values["b"]), "beta": float(values["beta"]),
                         "n_obs": int(values["n_obs"])})
        except (TypeError, KeyError, ValueError) as error:
            raise ReferenceScaleError(f"{path}: field 'families.{family}' needs numeric b, beta, n_obs ({error})") from None
    scale = float(field("display", "scale"))
    if not scale > 0:
        raise ReferenceScaleError(f"{path}: field 'display.scale' must be positive, got {scale}")
    return ReferenceScale(version=version, created_on=str(field("created_on")), fit=str(field("fit")),
                          display_offset=float(field("display", "offset")), display_scale=scale,
                          min_family_obs=int(field("linking", "min_family_obs")),
                          families=pd.DataFrame(rows, columns=["family", "b", "beta", "n_obs"]), path=path)


def write_reference(reference: ReferenceScale, directory: Path | None = None, overwrite: bool = False) -> Path:
    """Write a reference version; an existing version is never rewritten (a rebase is a new version)."""
    path = reference_path(reference.version, directory)
    if path.exists() and not overwrite:
        raise ReferenceScaleError(f"{path}: reference {reference.version!r} exists; versions are frozen, a rebase "
                                  "is a new version")
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Frozen reference scale {reference.version} (atlas_assets/outputs/reference_scale.py): family "
              "positions of the reference fit and its display map.\n# Written by `freeze`; never edited: a rebase "
              "is a new version with a published conversion.\n")
    path.write_text(header + yaml.safe_dump(reference.as_document(), sort_keys=False))
    return path


# --------------------------------------------------------------------------- linking


@dataclass(frozen=True)
class Link:
    """Per draw theta_ref = A + B * theta; `families`: the shared families the link used."""
    A: np.ndarray
    B: np.ndarray
    families: list[str]


def link(b_draws: np.ndarray, families: pd.DataFrame, reference: ReferenceScale, min_shared: int) -> Link:
    """Mean-sigma link of a fit's difficulty draws (D, J) onto the reference. `families`: the fit's family table
    in column order (`family`, `n_obs`). Only families both fits measured at least `reference.min_family_obs`
    times link; fewer than `min_shared` of them is an error (the link would rest on too little)."""
    ref = reference.families.set_index("family")
    fam = families.reset_index(drop=True)
    usable = fam["family"].isin(ref.index[ref["n_obs"] >= reference.min_family_obs]) & \
        (fam["n_obs"].to_numpy() >= reference.min_family_obs)
    columns = np.flatnonzero(usable.to_numpy())
    shared = fam.loc[columns, "family"].tolist()
    if len(shared) < min_shared:
        raise ReferenceScaleError(
            f"reference {reference.version}: the fit shares {len(shared)} well-measured families with it "
            f"(at least {reference.min_family_obs} observations in both), fewer than the {min_shared} a link needs: "
            "rebase (freeze a new version) instead")
    b_ref = ref.loc[shared, "b"].to_numpy()
    b_fit = b_draws[:, columns]
    B = b_ref.std() / b_fit.std(axis=1)
    A = b_ref.mean() - B * b_fit.mean(axis=1)
    return Link(A=A, B=B, families=shared)


def reference_display(link_: Link, reference: ReferenceScale):
    """Per-draw (offset, scale) of display = offset + scale * theta for the linked fit."""
    return reference.display_offset + reference.display_scale * link_.A, reference.display_scale * link_.B


def freeze(b_draws: np.ndarray, families: pd.DataFrame, anchor_offset: np.ndarray, anchor_scale: np.ndarray,
           *, version: str, fit: str, min_family_obs: int, created_on: str | None = None) -> ReferenceScale:
    """A reference from a fit: its families' posterior means, and c0, c1 so that the fit's own scores keep their
    anchored display units on average (per draw, c0 + c1 (A_d + B_d theta) = offset_d + scale_d theta, averaged)."""
    fam = families.reset_index(drop=True)
    frozen = pd.DataFrame({"family": fam["family"], "b": b_draws.mean(axis=0), "beta": np.nan,
                           "n_obs": fam["n_obs"].astype(int)})
    if "beta_mean" in fam:
        frozen["beta"] = fam["beta_mean"].to_numpy()
    provisional = ReferenceScale(version=version, created_on=created_on or dt.date.today().isoformat(), fit=fit,
                                 display_offset=0.0, display_scale=1.0, min_family_obs=min_family_obs, families=frozen)
    self_link = link(b_draws, fam, provisional, min_shared=2)
    c1 = float(np.mean(anchor_scale / self_link.B))
    c0 = float(np.mean(anchor_offset - c1 * self_link.A))
    return ReferenceScale(version=version, created_on=provisional.created_on, fit=fit, display_offset=c0,
                          display_scale=c1, min_family_obs=min_family_obs, families=frozen)


def conversion(old: ReferenceScale, new: ReferenceScale, min_shared: int) -> tuple[float, float, list[str]]:
    """A rebase's old->new display map, display_new = alpha + gamma * display_old: the two references' latent
    scales linked by mean-sigma on their shared families' frozen difficulties."""
    one_draw = new.families.set_index("family")
    fam = pd.DataFrame({"family": one_draw.index, "n_obs": one_draw["n_obs"].to_numpy()})
    to_old = link(one_draw["b"].to_numpy()[None, :], fam, old, min_shared)   # theta_old = A + B theta_new
    A, B = float(to_old.A[0]), float(to_old.B[0])
    # display_old = c0o + c1o (A + B t) and display_new = c0n + c1n t  =>  display_new = alpha + gamma display_old
    gamma = new.display_scale / (old.display_scale * B)
    alpha = new.display_offset - gamma * (old.display_offset + old.display_scale * A)
    return alpha, gamma, to_old.families


def frozen_versions(directory: Path | None = None) -> list[str]:
    """Every frozen reference version (the file names under the reference_scales folder), sorted."""
    folder = Path(directory or settings.reference_scale_dir())
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


CONVERSION_COLUMNS = ["old_version", "new_version", "alpha", "gamma", "n_shared_families", "shared_families",
                      "old_fit", "new_fit", "since_last_publication", "basis", "formula"]


def conversion_table(in_force: ReferenceScale, published_version: str | None, min_shared: int,
                     directory: Path | None = None) -> pd.DataFrame:
    """The old->new conversions a publication on `in_force` carries (a rebase is a new version WITH its conversion):
    from the reference version of the last good publication when it is another one (the scale changed since), and
    from every other frozen version, each as display_new = alpha + gamma * display_old (`conversion`). Empty when
    `in_force` is the only version and the last publication used it (or none). The last publication's version
    must still be frozen, and every pair must link: otherwise ReferenceScaleError naming the file or the versions,
    since a rebase without its conversion would leave the published numbers unconvertible."""
    olds = {v for v in frozen_versions(directory) if v != in_force.version}
    rebased = published_version is not None and published_version != in_force.version
    if rebased:
        olds.add(published_version)
    rows = []
    for version in sorted(olds):
        since = rebased and version == published_version
        try:
            old = load_reference(version, directory)
            alpha, gamma, shared = conversion(old, in_force, min_shared)
        except ReferenceScaleError as error:
            context = (f"the last good publication is on reference {version}, the scale in force is "
                       f"{in_force.version}" if since else f"frozen reference {version} beside {in_force.version}")
            raise ReferenceScaleError(f"no conversion {version} -> {in_force.version} ({context}): {error}") from None
        rows.append({"old_version": version, "new_version": in_force.version, "alpha": alpha, "gamma": gamma,
                     "n_shared_families": len(shared), "shared_families": ", ".join(shared), "old_fit": old.fit,
                     "new_fit": in_force.fit, "since_last_publication": since,
                     "basis": ("the last good publication's reference: the scale changed since" if since
                               else "another frozen reference version"),
                     "formula": f"display on {in_force.version} = {alpha:.4f} + {gamma:.6f} x display on {version}"})
    return pd.DataFrame(rows, columns=CONVERSION_COLUMNS)


# --------------------------------------------------------------------------- drift


def untouched_states(old_observations: pd.DataFrame, new_observations: pd.DataFrame) -> set[tuple[str, str]]:
    """(model, reasoning_state) whose modeled observations are identical in both fits (family, score, items)."""
    def signature(frame: pd.DataFrame) -> pd.Series:
        cells = frame.assign(cell=frame["family"] + "=" + frame["u"].round(6).astype(str) + "/" +
                             frame["items"].fillna(-1).astype(str))
        return cells.groupby(["model", "reasoning_state"])["cell"].apply(lambda c: "|".join(sorted(c)))

    old, new = signature(old_observations), signature(new_observations)
    shared = old.index.intersection(new.index)
    return {key for key in shared if old[key] == new[key]}


def scale_drift(old_scores: pd.DataFrame, new_scores: pd.DataFrame, untouched: set[tuple[str, str]]) -> pd.DataFrame:
    """Per untouched state in both score tables: old and new display mean, the move, and whether the move is within
    the new 90% interval's half-width (the issue's target)."""
    keys = ["model", "reasoning_state"]
    merged = old_scores[keys + ["display_mean"]].merge(
        new_scores[keys + ["display_mean", "display_lower", "display_upper"]], on=keys, suffixes=("_old", "_new"))
    merged = merged[[tuple(k) in untouched for k in merged[keys].itertuples(index=False)]].copy()
    merged["move"] = merged["display_mean_new"] - merged["display_mean_old"]
    half_width = (merged["display_upper"] - merged["display_lower"]) / 2
    merged["within_interval"] = merged["move"].abs() <= half_width
    return merged.drop(columns=["display_lower", "display_upper"]).reset_index(drop=True)


def drift_summary(drift: pd.DataFrame) -> dict:
    if drift.empty:
        return {"n_untouched": 0}
    return {"n_untouched": int(len(drift)), "mean_move": float(drift["move"].mean()),
            "median_abs_move": float(drift["move"].abs().median()), "max_abs_move": float(drift["move"].abs().max()),
            "share_within_interval": float(drift["within_interval"].mean())}


# --------------------------------------------------------------------------- a fit on a reference


def fit_on_reference(loaded, reference: ReferenceScale, min_shared: int):
    """The fit's DisplayScale on the reference (a drop-in for LoadedFit.scale) and its Link."""
    from dataclasses import replace

    from atlas_assets.model.scores import draws_of

    link_ = link(draws_of(loaded.idata, "b"), loaded.stan_input.families, reference, min_shared)
    offset, scale = reference_display(link_, reference)
    return replace(loaded.scale, offset=offset, scale=scale), link_


def scores_on_reference(loaded, reference: ReferenceScale, min_shared: int) -> dict[str, pd.DataFrame]:
    """state_scores and model_scores of a fit, on the reference scale (the anchors are ordinary states there)."""
    from atlas_assets.model.scores import model_scores, state_scores

    scale, _ = fit_on_reference(loaded, reference, min_shared)
    states = state_scores(loaded.idata, loaded.stan_input, loaded.config, scale=scale)
    states["is_reference"] = False
    states["note"] = None
    models = model_scores(loaded.idata, loaded.stan_input, loaded.config, scale=scale)
    for frame in (states, models):
        frame["reference_version"] = reference.version
    return {"state_scores": states, "model_scores": models}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Freeze a reference scale from a fit folder.")
    sub = parser.add_subparsers(dest="command", required=True)
    freeze_cmd = sub.add_parser("freeze", help="write config/reference_scales/<version>.yaml from a fit")
    freeze_cmd.add_argument("--version", required=True)
    freeze_cmd.add_argument("--fit", help="fit folder (default: the current publication's fit)")
    freeze_cmd.add_argument("--min-family-obs", type=int, default=10)
    freeze_cmd.add_argument("--directory", default=None)
    args = parser.parse_args(argv)

    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.model.scores import draws_of

    fit_dir = Path(args.fit) if args.fit else _current_publication_fit()
    loaded = load_fit(fit_dir)
    families = loaded.stan_input.families.copy()
    families["beta_mean"] = draws_of(loaded.idata, "beta").mean(axis=0)
    reference = freeze(draws_of(loaded.idata, "b"), families, np.asarray(loaded.scale.offset),
                       np.asarray(loaded.scale.scale), version=args.version, fit=fit_dir.name,
                       min_family_obs=args.min_family_obs)
    path = write_reference(reference, Path(args.directory) if args.directory else None)
    print(f"reference {reference.version}: {len(reference.families)} families from {fit_dir.name}; display = "
          f"{reference.display_offset:.3f} + {reference.display_scale:.3f} x theta_ref -> {path}")
    return 0


def _current_publication_fit() -> Path:
    publications = settings.atlas_home() / "publications"
    current = (publications / "CURRENT").read_text().strip()
    manifest = json.loads((publications / current / "manifest.json").read_text())
    return settings.atlas_home() / "model" / "fits" / manifest["stamps"]["fit"]


if __name__ == "__main__":
    sys.exit(main())
