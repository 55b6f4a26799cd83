"""The forward_thin fold end to end without Stan: `run_fold` on a simulated panel whose refit is an oracle (the
simulation's truth with a little noise per draw, for exactly the states and families the refit was given), so the
split, both prediction paths, the unscored list and the per-path summary are checked on known cells."""

from __future__ import annotations

import json
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest

from atlas_assets.model.simulate import simulate_panel, simulated_references
from atlas_assets.model.stan_data import build_stan_data, load_model_config
from atlas_assets.validation.config import load_validation_config
from atlas_assets.validation.folds import NOT_IN_REFIT_FAMILY, run_fold
from atlas_assets.validation.splits import make_split
from atlas_assets.validation.summary import cell_shares, cell_study_metrics

CHAINS, DRAWS = 2, 100


def oracle_fitter(truth, noise: float = 0.05):
    """A Fitter that writes the fit folder `load_fit` reads, its posterior the truth of the refit's own states."""

    def fit(train: pd.DataFrame, out: Path, cfg: dict, warm_from: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        si = build_stan_data(train, cfg)
        rng = np.random.default_rng(0)
        shape = (CHAINS, DRAWS)

        def around(values, positive=False):
            values = np.asarray(values, dtype=float)
            z = noise * rng.standard_normal(shape + values.shape)
            return values * np.exp(z) if positive else values + z

        fam = si.families
        bounded = fam.sort_values("bounded_pos").query("bounded_pos >= 0")["family"]
        rating = fam.sort_values("rating_pos").query("rating_pos >= 0")["family"]
        labels = si.states["model"] + "|" + si.states["reasoning_state"]
        settings = list(cfg["reasoning"]["ladder"]) + list(cfg["reasoning"]["off_ladder"])
        x = truth.extras
        post = {"phi": around(truth.phi[labels].to_numpy()), "theta": around(truth.theta[si.models["model"]].to_numpy()),
                # a family the simulation did not make (the test's own): middling difficulty and spread
                "b": around(truth.b.reindex(fam["family"]).fillna(0.0).to_numpy()),
                "beta": around(truth.beta.reindex(fam["family"]).fillna(1.0).to_numpy(), True),
                "kappa": around(truth.kappa.reindex(bounded).fillna(20.0).to_numpy(), True),
                "rating_sd": around(truth.rating_sd[rating].to_numpy(), True),
                "hurdle_a": around(truth.hurdle_a), "hurdle_b": around(truth.hurdle_b, True),
                "shared_effect": around(truth.shared_effect.reindex(settings).fillna(0.0).to_numpy()),
                "shared_sd": around(0.3, True), "amp_sd": around(float(x["amp_sd"]), True),
                "curv_sd": around(float(x["curv_sd"]), True),
                "offdev_sd": around([x["off_sd"].get(r, 0.3) for r in cfg["reasoning"]["off_ladder"]], True)}
        az.from_dict(posterior=post).to_netcdf(str(out / "posterior.nc"))
        train.to_csv(out / "modeled_observations.csv", index=False)
        (out / "model_config.json").write_text(json.dumps(cfg, default=str))
        (out / "diagnostics.json").write_text(json.dumps({"max_rhat": 1.0, "min_ess_bulk": 400.0, "divergences": 0,
                                                          "sample_seconds": 0.0, "n_gradient_evals": 0}))
        (out / "fit_summary.json").write_text(json.dumps({"passes": True}))

    return fit


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    """(panel as run_fold reads it, truth, validation config, references, production folder, temp folder)."""
    tmp = tmp_path_factory.mktemp("forward_thin")
    cfg = load_model_config()
    panel, truth = simulate_panel(n_models=60, n_families=10, target_obs=520, seed=5, config=cfg)
    cfg["display"]["reference"] = simulated_references(panel, truth)
    vcfg = load_validation_config(overrides={"forward": {"newest_share": 0.25, "thin_share": 0.5},
                                             "baselines": {"eci_form": {"bootstrap": 10}}})
    refs = [(cfg["display"]["reference"][k]["model"], "default") for k in ("low", "high")]
    # a family measured only by two thinned models: its held-out cells have no family in the refit
    thinned = make_split("forward_thin", panel, vcfg, refs).info["thinned_models"]
    solo = panel[panel["model"].isin(thinned[:2])].groupby("model").head(1).assign(family="solo", kind="bounded",
                                                                                   u=0.5, correct=np.nan, items=np.nan,
                                                                                   floor=0.0)
    production = tmp / "production"
    production.mkdir()
    pd.concat([panel, solo], ignore_index=True).to_csv(production / "modeled_observations.csv", index=False)
    panel = pd.read_csv(production / "modeled_observations.csv")  # as run_fold reads it
    (production / "model_config.json").write_text(json.dumps(cfg, default=str))
    build_stan_data(panel, cfg).states.to_csv(production / "index_states.csv", index=False)
    return panel, truth, vcfg, refs, production, tmp


@pytest.fixture(scope="module")
def fold(production):
    panel, truth, vcfg, refs, folder, tmp = production
    split = make_split("forward_thin", panel, vcfg, refs)
    assert split.info["thinned_models"][:2] == sorted(set(panel.loc[panel["family"] == "solo", "model"]))
    result = run_fold("forward_thin", folder, vcfg, tmp / "folds", fitter=oracle_fitter(truth), log=lambda m: None)
    return panel, split, result, vcfg, tmp / "folds" / "forward_thin" / "fit"


def test_both_paths_are_scored_and_every_held_out_cell_is_scored_or_listed_with_its_reason(fold):
    panel, split, result, _, _ = fold
    info, predictions, unscored = result.info, result.predictions, result.unscored
    atlas = predictions[predictions["method"] == "atlas"]
    assert {"fit", "calibrated"} <= set(atlas["path"]) and set(atlas["path"]) <= {
        "fit", "calibrated", "calibrated_unmeasured_setting"}
    # every held-out cell once: scored, or listed unscored with a reason; none both, none missing
    key = ["model", "reasoning_state", "family"]
    held = set(map(tuple, panel.loc[split.heldout, key].to_numpy()))
    scored = set(map(tuple, atlas[key].to_numpy()))
    listed = set(map(tuple, unscored[key].to_numpy()))
    assert scored | listed == held and not scored & listed
    assert info["n_heldout"] == info["n_scored"] + len(unscored) == len(held)
    assert unscored["reason"].notna().all() and (unscored["reason"].str.len() > 0).all()
    # the cells on the family only thinned models measured cannot be placed, and say why
    solo = unscored[unscored["family"] == "solo"]
    assert len(solo) and (solo["reason"] == NOT_IN_REFIT_FAMILY).all() and not solo["predicted_by_model"].any()
    # each cell's path is its model's: calibrate-in for the thinned models, the refit for the others
    thinned = set(split.info["thinned_models"])
    assert atlas.loc[atlas["path"] == "fit", "model"].isin(thinned).sum() == 0
    assert atlas.loc[atlas["path"] != "fit", "model"].isin(thinned).all()
    assert info["n_predicted"] == info["n_predicted_fit"] + info["n_predicted_calibrated"] + \
        info["n_predicted_calibrated_unmeasured_setting"]
    # identical cells for every method
    assert predictions.groupby("method").size().nunique() == 1


def test_the_refit_holds_the_fitted_new_models_without_their_hidden_cells_and_none_of_the_thinned(fold):
    panel, split, _, _, fit_dir = fold
    refit = pd.read_csv(fit_dir / "modeled_observations.csv")
    key = ["model", "reasoning_state", "family"]
    in_refit = set(map(tuple, refit[key].to_numpy()))
    assert not set(refit["model"]) & set(split.info["thinned_models"])
    fitted = set(split.info["fitted_new_models"])
    assert fitted <= set(refit["model"])
    hidden = panel[split.heldout & panel["model"].isin(fitted).to_numpy()]
    assert len(hidden) and not set(map(tuple, hidden[key].to_numpy())) & in_refit
    assert len(refit) == int(split.train.sum())


def test_the_summary_reports_each_path_with_its_share_predicted(fold):
    _, _, result, vcfg, _ = fold
    metrics = cell_study_metrics(result.predictions, [float(x) for x in vcfg["intervals"]])
    folds = pd.DataFrame([result.info])
    shares = cell_shares(metrics, folds, result.predictions, result.unscored).set_index(["study", "method"])
    rows = {s for s, _ in shares.index}
    assert {"forward_thin", "forward_thin:fit", "forward_thin:calibrate_in", "forward_thin:calibrated"} <= rows
    fit, cal = shares.loc[("forward_thin:fit", "atlas")], shares.loc[("forward_thin:calibrate_in", "atlas")]
    # the solo family's cells are calibrate-in cells the model could not place
    assert fit["share_predicted"] == 1.0 and cal["share_predicted"] < 1.0
    whole = shares.loc[("forward_thin", "atlas")]
    assert whole["heldout_cells"] == result.info["n_heldout"] == fit["heldout_cells"] + cal["heldout_cells"]
    assert whole["share_predicted"] == pytest.approx(result.info["n_predicted"] / result.info["n_heldout"])
    # an oracle refit: both paths' intervals cover (a cell misaligned with its prediction would not)
    assert fit["coverage_90"] > 0.75 and cal["coverage_90"] > 0.7


def test_the_forward_fold_scores_or_lists_every_held_out_cell_through_the_refit(production):
    panel, truth, vcfg, refs, folder, tmp = production
    split = make_split("forward", panel, vcfg, refs)
    result = run_fold("forward", folder, vcfg, tmp / "folds", fitter=oracle_fitter(truth), log=lambda m: None)
    atlas = result.predictions[result.predictions["method"] == "atlas"]
    assert len(atlas) + len(result.unscored) == int(split.heldout.sum()) == result.info["n_heldout"]
    assert result.info["n_predicted"] == result.info["n_heldout"] - int((~result.unscored["predicted_by_model"]).sum())
    assert "path" not in result.predictions  # one path: the refit
    assert result.unscored["reason"].notna().all()


def test_the_fold_check_flags_a_fold_whose_cells_are_neither_scored_nor_listed(tmp_path):
    import duckdb
    from dagster_duckdb import DuckDBResource

    from atlas_assets.defs.validation.checks import _silently_dropped

    path = tmp_path / "atlas.duckdb"
    folds = pd.DataFrame({"fit": "f", "fold": ["forward", "forward_thin", "masked_0", "family_0"],
                          "study": ["forward", "forward_thin", "masked", "family"], "n_heldout": [5, 7, 4, 30],
                          "n_scored": [3, 5, 4, 2], "n_predicted": [5, 6, np.nan, np.nan]})
    unscored = pd.DataFrame({"fit": "f", "fold": ["forward", "forward", "forward_thin"], "reason": "x"})
    with duckdb.connect(str(path)) as conn:
        conn.register("a", folds)
        conn.register("b", unscored)
        conn.execute("CREATE TABLE validation_folds AS SELECT * FROM a")
        conn.execute("CREATE TABLE validation_unscored AS SELECT * FROM b")
    problems = _silently_dropped(DuckDBResource(database=str(path)))
    # forward: 3 scored + 2 listed of 5; forward_thin: 5 + 1 of 7 (one dropped silently); masked_0 was written before
    # the list existed (no n_predicted) and family folds score leaderboards: neither is judged
    assert problems == ["fold forward_thin of fit f: 7 held out, 5 scored, 1 listed unscored (cells dropped silently)"]
