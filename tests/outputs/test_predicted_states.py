"""Predicted reasoning settings: the formula against the program's phi, ladder contrasts by hand, the learned
off-ladder spread, the registry rule, cells, determinism, the unknown-setting mixture."""

from __future__ import annotations

import json
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest

from atlas_assets.model.scores import display_scale, resolve_reference_states
from atlas_assets.model.simulate import simulate_panel, simulated_references
from atlas_assets.model.stan_data import build_stan_data, load_model_config
from atlas_assets.outputs.draws import PosteriorDraws, typical_items
from atlas_assets.outputs.predicted_states import (
    STATUS,
    candidate_phi,
    phi_draws,
    predict_states,
    reasoning_posterior,
    reconstruction_error,
    setting_plausibility,
    state_layout,
    state_phi,
    unknown_setting_candidates,
)
from atlas_assets.outputs.unknown_settings import mixture
from tests.outputs.tiny import config as outputs_config

# orthonormal polynomial contrasts over six equally spaced levels, written out (R's contr.poly(6))
LIN = np.array([-5, -3, -1, 1, 3, 5]) / np.sqrt(70)
QUAD = np.array([5, -1, -4, -4, -1, 5]) / np.sqrt(84)
LADDER = ["minimal", "low", "medium", "high", "xhigh", "max"]


def stan_phi(data: dict, theta, shared, amp_sd, curv_sd, amp_z, curv_z, offdev_sd, dev_z) -> np.ndarray:
    """The transformed-parameters block of stan/atlas.stan transcribed on the data dict (draw first)."""
    D = theta.shape[0]
    zero = np.zeros((D, 1))
    shared_full = np.concatenate([zero, shared], axis=1)
    amp_full = np.concatenate([zero, amp_sd[:, None] * amp_z], axis=1)
    curv_full = np.concatenate([zero, curv_sd[:, None] * curv_z], axis=1)
    dev_full = np.concatenate([zero, offdev_sd[:, np.asarray(data["dev_setting"], int) - 1] * dev_z], axis=1)
    sm = np.asarray(data["state_model"]) - 1
    amp1 = np.asarray(data["state_amp"])
    return (theta[:, sm] + shared_full[:, np.asarray(data["state_setting"])]
            + amp_full[:, amp1] * np.asarray(data["d_lin"]) + curv_full[:, amp1] * np.asarray(data["d_quad"])
            + dev_full[:, np.asarray(data["state_dev"])])


def primitives(data: dict, D: int, rng: np.random.Generator, **fixed) -> dict[str, np.ndarray]:
    L, K, A, Dd, M = data["L"], data["K_off"], data["A"], data["D"], data["M"]
    p = {
        "theta": rng.normal(0, 1, (D, M)), "shared_effect": rng.normal(0, 0.4, (D, L + K)),
        "amp_sd": np.abs(rng.normal(0.3, 0.05, D)), "curv_sd": np.abs(rng.normal(0.15, 0.03, D)),
        "amp_z": rng.normal(0, 1, (D, A)), "curv_z": rng.normal(0, 1, (D, A)),
        "offdev_sd": np.abs(rng.normal(0.4, 0.05, (D, K))), "dev_z": rng.normal(0, 1, (D, Dd)),
    }
    p.update({k: np.broadcast_to(np.asarray(v, float), p[k].shape).copy() for k, v in fixed.items()})
    p["phi"] = stan_phi(data, p["theta"], p["shared_effect"], p["amp_sd"], p["curv_sd"], p["amp_z"], p["curv_z"],
                        p["offdev_sd"], p["dev_z"])
    return p


def as_idata(p: dict, chains: int = 2) -> az.InferenceData:
    def shaped(v):
        return v.reshape((chains, v.shape[0] // chains) + v.shape[1:])
    return az.from_dict(posterior={k: shaped(v) for k, v in p.items()})


# ------------------------------------------------------------------------------------- a simulated panel


@pytest.fixture(scope="module")
def panel():
    cfg = load_model_config()
    df, truth = simulate_panel(n_models=40, n_families=8, target_obs=320, seed=11, config=cfg)
    cfg["display"]["reference"] = simulated_references(df, truth)
    si = build_stan_data(df, cfg)
    rng = np.random.default_rng(2)
    D = 200
    # capabilities around the simulated truth, so the two display references keep their order in every draw
    theta = truth.theta[si.models["model"]].to_numpy() + 0.05 * rng.standard_normal((D, si.data["M"]))
    p = primitives(si.data, D, rng, theta=theta)
    fam = si.families
    J = len(fam)
    bounded = (fam["kind"] == "bounded").to_numpy()
    kappa = np.where(bounded, 20.0, np.nan) * np.ones((D, J))
    rating_sd = np.where(bounded, np.nan, 0.5) * np.ones((D, J))
    lo, hi = resolve_reference_states(si, cfg)
    ref = cfg["display"]["reference"]
    sc = display_scale(p["phi"], lo, hi, ref["low"]["value"], ref["high"]["value"])
    draws = PosteriorDraws(phi=p["phi"], b=rng.normal(0, 0.1, (D, J)), beta=np.exp(rng.normal(0.3, 0.05, (D, J))),
                           kappa=kappa, rating_sd=rating_sd, hurdle_a=np.full(D, -3.0), hurdle_b=np.full(D, 1.0),
                           scale=sc.scale, offset=sc.offset, one_eps=float(si.data["one_eps"]))
    return si, cfg, p, draws


def test_simulated_panel_exercises_every_term(panel):
    si, _, _, _ = panel
    d = si.data
    assert d["A"] > 0 and d["D"] > 0 and d["M"] > d["M_ref"]    # ladder terms, deviations, free models
    assert (si.states.loc[si.states.pinned, "setting_code"] > 0).any()


def test_reconstruction_equals_the_programs_phi_on_observed_states(panel):
    si, _, p, _ = panel
    post = reasoning_posterior(as_idata(p))
    layout = state_layout(si, si.states[["model", "reasoning_state"]])
    # the contrasts computed from the pinned level equal the data the program was given
    np.testing.assert_allclose(layout["d_lin"], si.states["d_lin"], atol=1e-12)
    np.testing.assert_allclose(layout["d_quad"], si.states["d_quad"], atol=1e-12)
    assert (layout["deviation"] != "prior").all() and (layout["ladder_terms"] != "prior").all()
    np.testing.assert_allclose(phi_draws(post, layout), p["phi"], rtol=0, atol=1e-12)
    assert reconstruction_error(post, si, p["phi"]) < 1e-12


# ------------------------------------------------------------------------------------- a hand-made fit


def hand_fit():
    """r1..r3 default only; x at default, low, high (own amplitude); y only at max (pinned on the ladder, no
    amplitude of its own); z at default and disabled."""
    states = {"r1": ["default"], "r2": ["default"], "r3": ["default"], "x": ["default", "low", "high"],
              "y": ["max"], "z": ["default", "disabled"]}
    rows = [{"model": m, "reasoning_state": s, "family": f, "kind": "bounded", "u": 0.5, "correct": np.nan,
             "items": np.nan, "floor": 0.0} for m, ss in states.items() for s in ss for f in ("f1", "f2")]
    cfg = load_model_config()
    cfg["display"]["reference"] = {"low": {"model": "r1", "reasoning_state": "default", "value": 100.0},
                                   "high": {"model": "r2", "reasoning_state": "default", "value": 150.0}}
    return build_stan_data(pd.DataFrame(rows), cfg)


def test_ladder_contrasts_at_an_unobserved_level_by_hand():
    si = hand_fit()
    d = si.data
    assert d["A"] == 1 and d["D"] == 1
    D = 20_000
    theta = np.tile(np.arange(d["M"], dtype=float), (D, 1))
    shared = np.tile(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, -0.7, 0.8]), (D, 1))
    p = primitives(d, D, np.random.default_rng(0), theta=theta, shared_effect=shared, amp_sd=0.5, curv_sd=0.25,
                   amp_z=2.0, curv_z=-2.0, offdev_sd=[0.3, 0.6], dev_z=1.0)
    post = reasoning_posterior(as_idata(p))
    pos = dict(zip(si.models["model"], si.models["theta_pos"]))
    # x (pinned at default): its own amp = 1, curv = -0.5 on the raw contrasts
    x_medium = state_phi(post, si, "x", "medium")
    expect = pos["x"] + 0.3 + 1.0 * LIN[2] - 0.5 * QUAD[2]
    np.testing.assert_allclose(x_medium, expect, atol=1e-12)
    np.testing.assert_allclose(state_phi(post, si, "x", "max"), pos["x"] + 0.6 + LIN[5] - 0.5 * QUAD[5], atol=1e-12)
    # y (pinned at max, no amplitude in the fit): contrasts measured from max, amp/curv from their prior, one
    # draw per model shared by all its levels
    layout = state_layout(si, pd.DataFrame({"model": "y", "reasoning_state": ["high", "low", "minimal", "max"]}))
    assert layout["ladder_terms"].tolist()[:3] == ["prior"] * 3 and bool(layout["observed"].iloc[3])
    np.testing.assert_allclose(layout["d_lin"].iloc[:3], LIN[[3, 1, 0]] - LIN[5], atol=1e-12)
    phis = phi_draws(post, layout, seed=3)
    np.testing.assert_allclose(phis[:, 3], p["phi"][:, si.states.index[(si.states.model == "y")][0]], atol=1e-12)
    resid = phis[:, :3] - (pos["y"] + shared[:, [3, 1, 0]])
    dl, dq = LIN[[3, 1, 0]] - LIN[5], QUAD[[3, 1, 0]] - QUAD[5]
    amp_curv = np.linalg.solve(np.array([[dl[0], dq[0]], [dl[1], dq[1]]]), resid[:, :2].T).T
    np.testing.assert_allclose(amp_curv @ np.array([dl[2], dq[2]]), resid[:, 2], atol=1e-9)  # the same (amp, curv)
    assert amp_curv[:, 0].std() == pytest.approx(0.5, rel=0.03)
    assert amp_curv[:, 1].std() == pytest.approx(0.25, rel=0.03)
    assert abs(amp_curv[:, 0].mean()) < 0.02 and abs(np.corrcoef(amp_curv.T)[0, 1]) < 0.03


def test_off_ladder_deviation_has_the_learned_spread():
    si = hand_fit()
    d = si.data
    D = 20_000
    p = primitives(d, D, np.random.default_rng(1), offdev_sd=[0.3, 0.6], dev_z=1.5)
    post = reasoning_posterior(as_idata(p))
    pos = dict(zip(si.models["model"], si.models["theta_pos"]))
    # z observed at disabled: the fit's own deviation; enabled: a new one with sd offdev_sd[enabled]
    np.testing.assert_allclose(state_phi(post, si, "z", "disabled"),
                               p["theta"][:, pos["z"]] + p["shared_effect"][:, 6] + 0.3 * 1.5, atol=1e-12)
    dev = state_phi(post, si, "z", "enabled") - p["theta"][:, pos["z"]] - p["shared_effect"][:, 7]
    assert dev.std() == pytest.approx(0.6, rel=0.03) and abs(dev.mean()) < 0.02
    dev_x = state_phi(post, si, "x", "disabled") - p["theta"][:, pos["x"]] - p["shared_effect"][:, 6]
    assert dev_x.std() == pytest.approx(0.3, rel=0.03)
    # default of a model without an observed one is its theta
    np.testing.assert_allclose(state_phi(post, si, "y", "default"), p["theta"][:, pos["y"]], atol=1e-12)


# ------------------------------------------------------------------------------------- the registry rule


def test_registry_rule():
    cfg = load_model_config()
    fitted = pd.DataFrame([
        ("gpt-old", "default"), ("o-mid", "low"), ("o-mid", "high"), ("o-new", "xhigh"), ("no-mode", "default"),
        ("claude", "default"), ("claude", "high"), ("product", "default"), ("product", "high"), ("orphan", "high"),
        ("undated", "medium")], columns=["model", "reasoning_state"])
    registry_models = pd.DataFrame({
        "model": ["gpt-old", "o-mid", "o-new", "no-mode", "claude", "claude-new", "product", "orphan", "undated",
                  "o-undated"],
        "organization": ["OpenAI", "OpenAI", "OpenAI,Microsoft", "OpenAI", "Anthropic", "Anthropic", "OpenAI", None,
                         "OpenAI", "OpenAI"],
        "released_on": pd.to_datetime(["2023-01-01", "2025-01-01", "2026-01-01", "2024-06-01", "2025-03-01",
                                       "2026-02-01", "2025-06-01", "2025-01-01", None, None])})
    ids = pd.DataFrame([("o-new", "disabled"), ("claude-new", "max"), ("o-undated", "enabled"), ("o-mid", None)],
                       columns=["model", "reasoning_state"])
    plaus = setting_plausibility(fitted, cfg, registry_models, ids, no_reasoning_mode={"no-mode"},
                                 reasoning_products={"product"})
    ok = {(m, r) for m, r, good in zip(plaus.model, plaus.reasoning_state, plaus.plausible) if good}
    assert not plaus.duplicated(["model", "reasoning_state"]).any()
    assert not (set(zip(plaus.model, plaus.reasoning_state)) & set(zip(fitted.model, fitted.reasoning_state)))
    assert len(plaus) == fitted["model"].nunique() * 9 - len(fitted)
    by_model = lambda m: {r for mm, r in ok if mm == m}  # noqa: E731
    assert by_model("gpt-old") == set() and by_model("no-mode") == set()     # no reasoning mode: nothing
    assert by_model("o-mid") == {"default"}          # OpenAI's xhigh and disabled came later
    assert by_model("o-new") == {"default", "low", "high", "disabled"}   # provider: first organization
    assert by_model("claude") == set()              # Anthropic's max came later; no disabled
    assert by_model("product") == {"low"}            # OpenAI's low by 2025-06; thinking never off
    reason = plaus.set_index(["model", "reasoning_state"])["basis"]
    assert "reasoning_products" in reason[("product", "disabled")]
    assert "no_reasoning_mode" in reason[("no-mode", "high")]
    assert "not assumed" in reason[("gpt-old", "high")]
    assert by_model("orphan") == {"default"} and "provider unknown" in reason[("orphan", "low")]
    # an undated model gets all its provider's levels; an undated publication dates nothing
    assert by_model("undated") == {"default", "low", "high", "xhigh", "disabled", "enabled"}
    assert "undated" in reason[("o-new", "enabled")]


# ------------------------------------------------------------------------------------- cells and determinism


def simulated_plausibility(si):
    """Every unobserved setting of every model with a non-default state, plus default where missing."""
    rows = []
    for m, st in si.states.groupby("model"):
        seen = set(st.reasoning_state)
        has_mode = bool(seen - {"default"})
        for r in ["default"] + LADDER + ["disabled", "enabled"]:
            if r not in seen:
                rows.append({"model": m, "reasoning_state": r, "setting_kind": "x", "provider": None,
                             "plausible": r == "default" or has_mode, "basis": "test"})
    return pd.DataFrame(rows)


def test_cells_and_tables(panel):
    si, cfg, p, draws = panel
    post = reasoning_posterior(as_idata(p))
    plaus = simulated_plausibility(si)
    ocfg = outputs_config()
    elig = np.ones(len(si.states), bool)
    res = predict_states(post, draws, si, ocfg, plaus, elig)
    pred, cells = res.states, res.cells
    assert res.reconstruction_error < 1e-12
    assert len(pred) == plaus["plausible"].sum() and len(res.exclusions) == (~plaus["plausible"]).sum()
    assert not pred.duplicated(["model", "reasoning_state"]).any()
    assert (pred["status"] == STATUS).all() and not pred["eligible"].any()
    assert (pred["display_lower"] <= pred["display_median"]).all() and (pred["display_median"] <= pred["display_upper"]).all()
    assert pred[["p_rank1", "p_top10"]].stack().between(0, 1).all()
    # display per draw on the fit's own scale
    np.testing.assert_allclose(pred["display_mean"], draws.display(res.phi).mean(axis=0))
    # every predicted state x family once, nothing observed, bounded predictions inside [0, 1]
    J = len(si.families)
    assert len(cells) == len(pred) * J and not cells.duplicated(["state_pos", "family"]).any()
    assert not cells["observed"].any() and not cells["eligible"].any()
    b = cells[cells["family"].isin(si.families.loc[si.families.kind == "bounded", "family"])]
    assert b[["pred_mean", "lower_90", "upper_90", "lower_50", "upper_50"]].stack().between(0, 1).all()
    assert (cells.lower_90 <= cells.lower_50).all() and (cells.lower_50 <= cells.pred_median).all()
    assert (cells.pred_median <= cells.upper_50).all() and (cells.upper_50 <= cells.upper_90).all()
    typical = typical_items(si.observations, J)
    np.testing.assert_array_equal(cells["n_items"].to_numpy(), typical[cells["family_pos"].to_numpy()])
    key = pred.set_index("pred_pos")
    assert (cells["model"].to_numpy() == key.loc[cells["state_pos"], "model"].to_numpy()).all()
    # same columns as cell_predictions
    from atlas_assets.outputs.cell_predictions import cell_predictions
    base = cell_predictions(draws, si.families, si.observations, si.states, elig, ocfg)
    assert set(base.columns) <= set(cells.columns)


def test_deterministic_under_a_seed_and_independent_of_the_other_pairs(panel):
    si, _, p, draws = panel
    post = reasoning_posterior(as_idata(p))
    plaus = simulated_plausibility(si)
    ocfg = outputs_config()
    elig = np.ones(len(si.states), bool)
    a = predict_states(post, draws, si, ocfg, plaus, elig)
    b = predict_states(post, draws, si, ocfg, plaus, elig)
    np.testing.assert_array_equal(a.phi, b.phi)
    pd.testing.assert_frame_equal(a.cells, b.cells)
    c = predict_states(post, draws, si, ocfg, plaus, elig, seed=99)
    assert not np.array_equal(a.phi, c.phi)
    row = a.states[a.states.deviation == "prior"].iloc[0]
    alone = state_phi(post, si, row.model, row.reasoning_state, seed=int(ocfg["draws"]["seed"]))
    np.testing.assert_array_equal(alone, a.phi[:, int(row.pred_pos)])


def test_unknown_setting_mixture(panel):
    si, _, p, _ = panel
    post = reasoning_posterior(as_idata(p))
    model = si.states.loc[si.states.amp_index > 0, "model"].iloc[0]
    seen = si.states.loc[si.states.model == model, "reasoning_state"].tolist()
    extra = [r for r in LADDER if r not in seen][:1]
    plaus = pd.DataFrame({"model": model, "reasoning_state": extra + ["enabled"], "plausible": [True, False]})
    candidates = unknown_setting_candidates(si.states, plaus, model)
    assert candidates == seen + extra
    phis = candidate_phi(post, si, model, candidates, seed=4)
    mix = mixture(model, candidates, phis, seed=4)
    each = phi_draws(post, state_layout(si, pd.DataFrame({"model": model, "reasoning_state": mix.settings})), seed=4)
    np.testing.assert_array_equal(mix.phi, each[np.arange(len(mix.phi)), mix.picked])
    assert set(mix.picked) == set(range(len(candidates)))                      # equal prior weights
    lw = np.full((post.n_draws, len(candidates)), -50.0)
    lw[:, 1] = 0.0
    sure = mixture(model, candidates, phis, lw, seed=4)
    assert (sure.picked == 1).all()


# ------------------------------------------------------------------------------------- the production fit


PRODUCTION_FITS = Path(__file__).resolve().parents[2] / "var" / "model" / "fits"


@pytest.mark.slow
def test_reconstruction_on_the_latest_production_fit():
    fits = [f for f in PRODUCTION_FITS.glob("*") if f.is_dir() and not f.name.endswith((".failed", ".partial"))
            and (f / "fit_summary.json").exists()] if PRODUCTION_FITS.exists() else []
    if not fits:
        pytest.skip("no production fit under var/model/fits")
    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.model.scores import draws_of

    loaded = load_fit(max(fits, key=lambda f: (f / "fit_summary.json").stat().st_mtime))
    post = reasoning_posterior(loaded.idata)
    assert reconstruction_error(post, loaded.stan_input, draws_of(loaded.idata, "phi")) < 1e-8


# ------------------------------------------------------------------------------------- the asset and its checks


def write_fit(folder: Path, si, cfg, p: dict, draws: PosteriorDraws, spec_sha256: str) -> Path:
    """A fit folder in `fit_process.run_fit`'s format whose posterior holds the primitives and the family parameters."""
    from tests.outputs.test_outputs_assets import write_fit_folder

    fam = si.families
    bp, rp = fam["bounded_pos"].to_numpy(), fam["rating_pos"].to_numpy()
    post = {**{k: v for k, v in p.items()}, "b": draws.b, "beta": draws.beta,
            "kappa": draws.kappa[:, bp >= 0][:, np.argsort(bp[bp >= 0])],
            "rating_sd": draws.rating_sd[:, rp >= 0][:, np.argsort(rp[rp >= 0])],
            "hurdle_a": draws.hurdle_a, "hurdle_b": draws.hurdle_b}
    return write_fit_folder(folder, si, as_idata(post), cfg, spec_sha256)


@pytest.mark.slow
def test_asset_writes_three_tables_of_one_fit_and_its_checks_pass(panel, tmp_path, monkeypatch):
    import dagster as dg
    import duckdb
    import yaml
    from dagster_duckdb import DuckDBResource

    from atlas_assets.defs.outputs import predicted_states as defs_module
    from atlas_assets.model.scores import state_scores
    from atlas_assets.spec import specification_fingerprint

    si, cfg, p, draws = panel
    model_yaml = tmp_path / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(model_yaml))
    fit_dir = write_fit(tmp_path / "fits" / "synthetic", si, cfg, p, draws, specification_fingerprint())
    db = tmp_path / "atlas.duckdb"
    with duckdb.connect(str(db)) as conn:
        for name, frame in {"model_index_states": si.states, "model_index_models": si.models,
                            "model_index_families": si.families,
                            "capability_state_scores": state_scores(as_idata(p), si, cfg)}.items():
            conn.register("frame", frame)
            conn.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            conn.unregister("frame")
        # a registry: every simulated model by one provider, released in name order
        models = si.models["model"]
        conn.register("frame", pd.DataFrame({"model": models, "organization": "Sim",
                                             "released_on": pd.Timestamp("2025-01-01") + pd.to_timedelta(
                                                 np.arange(len(models)), unit="D")}))
        conn.execute("CREATE TABLE registry_models AS SELECT * FROM frame")
        # unknown-setting runs (state 'unknown', kept by cleaning, not fitted): two of a fitted model on fitted
        # families, one on a family the fit lacks, one of a model outside the fit (calibrate-in's business)
        obs = si.observations
        mine = obs[obs["model"] == obs["model"].iloc[0]].drop_duplicates("family").head(2)
        unknown = pd.concat([mine.assign(reasoning_state="unknown"),
                             mine.head(1).assign(reasoning_state="unknown", family="not_fitted"),
                             mine.head(1).assign(reasoning_state="unknown", model="outside")], ignore_index=True)
        conn.register("frame", unknown[["model", "reasoning_state", "family", "kind", "u", "correct", "items", "floor"]])
        conn.execute("CREATE TABLE family_observations AS SELECT * FROM frame")
    instance = dg.DagsterInstance.ephemeral()
    instance.report_runless_asset_event(
        dg.AssetMaterialization("capability_fit", metadata={"fit_dir": dg.MetadataValue.path(str(fit_dir))}))
    result = dg.materialize([defs_module.predicted_states, defs_module.predicted_states_valid,
                             defs_module.predicted_states_plausible], instance=instance,
                            resources={"duckdb": DuckDBResource(database=str(db))}, raise_on_error=False)
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["predicted_states_valid"], checks
    with duckdb.connect(str(db), read_only=True) as conn:
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        n_pred = q("SELECT count(*) FROM predicted_states")[0][0]
        assert n_pred > 0 and q("SELECT count(*) FROM predicted_state_cells")[0][0] == n_pred * len(si.families)
        assert q("SELECT DISTINCT fit FROM (SELECT fit FROM predicted_states UNION ALL SELECT fit FROM "
                 "predicted_state_cells UNION ALL SELECT fit FROM predicted_state_exclusions)") == [("synthetic",)]
        # a ladder level came from the provider's publications, not only the defaults
        assert q("SELECT count(*) FROM predicted_states WHERE reasoning_state <> 'default'")[0][0] > 0
        unknown_states = conn.execute("SELECT * FROM unknown_setting_states").df()
        assert unknown_states["model"].tolist() == [obs["model"].iloc[0]]
        row = unknown_states.iloc[0]
        assert row["n_obs"] == 2 and row["rows_not_used"] == 1 and not row["eligible"]
        probabilities = json.loads(row["setting_probabilities"])
        assert abs(sum(probabilities.values()) - 1) < 1e-6 and row["most_probable_setting"] in probabilities
        assert set(probabilities) >= set(si.states.loc[si.states["model"] == row["model"], "reasoning_state"])
        assert q("SELECT count(*) FROM unknown_setting_cells")[0][0] == len(si.families)
