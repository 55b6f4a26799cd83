"""Validation splits: which cells each fold holds out, on a hand-made panel whose answer is known."""

import numpy as np
import pandas as pd
import pytest

from atlas_assets.validation.config import load_validation_config
from atlas_assets.validation.splits import (
    family_groups,
    fold_keys,
    make_split,
    release_cut,
)

REFS = [("ref-low", "default"), ("ref-high", "high")]


def panel() -> pd.DataFrame:
    """8 dated models (2 new: m6, m7), 6 families; the references are old; family `late` is first seen in 2026."""
    rows = []
    dates = {f"m{i}": f"2024-0{i + 1}-01" for i in range(6)} | {"m6": "2025-06-01", "m7": "2025-07-01",
                                                                 "ref-low": "2023-01-01", "ref-high": "2023-02-01",
                                                                 "undated": None}
    fams = ["a", "b", "c", "d", "e"]
    for model, date in dates.items():
        states = ["default", "high"] if model in ("m7", "ref-high") else ["default"]
        for state in states:
            for f in fams:
                rows.append({"model": model, "reasoning_state": state, "family": f, "u": 0.5, "released_on": date})
    for model in ("m6", "m7"):
        rows.append({"model": model, "reasoning_state": "default", "family": "late", "u": 0.2, "released_on": dates[model]})
    return pd.DataFrame(rows)


@pytest.fixture
def cfg():
    return load_validation_config(overrides={"forward": {"newest_share": 0.2, "hide_share": 0.5},
                                             "family": {"folds": 3, "groups": {"ab": ["a", "b"]}},
                                             "masked": {"folds": 4}, "sensitivity": {"families": 2}})


def test_forward_hides_half_of_each_new_state_never_its_last_and_never_a_reference(cfg):
    obs = panel()
    cut, new = release_cut(obs, 0.2)
    assert new == ["m6", "m7"] and str(cut.date()) == "2025-06-01"  # 2 of 10 dated models
    split = make_split("forward", obs, cfg, REFS)
    held = obs[split.heldout]
    assert set(held["model"]) == {"m6", "m7"}
    per_state = obs.assign(h=split.heldout).groupby(["model", "reasoning_state"])["h"].agg(["sum", "size"])
    new_states = per_state.loc[["m6", "m7"]]
    assert (new_states["sum"] == np.floor(new_states["size"] / 2)).all()
    assert (new_states["sum"] < new_states["size"]).all()
    assert not split.dropped.any()
    assert make_split("forward", obs, cfg, REFS).heldout.tolist() == split.heldout.tolist()  # seeded


def test_strict_forward_also_drops_families_first_seen_after_the_cut(cfg):
    obs = panel()
    plain, strict = make_split("forward", obs, cfg, REFS), make_split("forward_strict", obs, cfg, REFS)
    assert set(obs.loc[strict.dropped, "family"]) == {"late"}
    assert strict.info["late_families"] == ["late"]
    assert not (strict.heldout & strict.dropped).any()
    # the same cells are hidden outside the dropped family
    keep = ~strict.dropped
    assert (plain.heldout[keep] == strict.heldout[keep]).all()


def test_masked_folds_partition_every_non_reference_cell_once(cfg):
    obs = panel()
    folds = [make_split(f"masked_{k}", obs, cfg, REFS) for k in range(4)]
    counts = np.sum([s.heldout for s in folds], axis=0)
    is_ref = obs[["model", "reasoning_state"]].apply(tuple, axis=1).isin(REFS).to_numpy()
    assert (counts[~is_ref] == 1).all() and (counts[is_ref] == 0).all()
    sizes = [int(s.heldout.sum()) for s in folds]
    assert max(sizes) - min(sizes) <= 1


def test_family_folds_keep_a_group_together_and_cover_every_family(cfg):
    obs = panel()
    groups = family_groups(obs, cfg, REFS)
    assert sorted(f for g in groups for f in g) == sorted(obs["family"].unique())
    assert any({"a", "b"} <= set(g) for g in groups)
    split = make_split("family_0", obs, cfg, REFS)
    assert set(obs.loc[split.heldout, "family"]) == set(groups[0])


def test_sensitivity_drops_the_best_covered_families_in_turn(cfg):
    obs = panel()
    dropped = [make_split(f"sensitivity_{k}", obs, cfg, REFS).info["dropped_family"] for k in range(2)]
    assert dropped == ["a", "b"]  # ties on coverage broken by name; "late" has the fewest cells


def test_fold_keys_follow_the_config_and_unknown_folds_are_refused(cfg):
    keys = fold_keys(cfg)
    assert keys[:2] == ["forward", "forward_strict"] and "masked_3" in keys and "family_2" in keys
    assert "sensitivity_1" in keys and "sensitivity_2" not in keys
    with pytest.raises(ValueError, match="unknown validation fold 'masked_9'"):
        make_split("masked_9", panel(), cfg, REFS)


def test_masked_state_hides_one_non_pinned_state_per_model_with_several(cfg):
    obs = panel()
    pinned = {("m7", "default"), ("ref-high", "high")}
    split = make_split("masked_state", obs, cfg, REFS, pinned)
    hidden = obs.loc[split.heldout, ["model", "reasoning_state"]].drop_duplicates()
    # m7 has two states: its non-pinned one (high) is hidden whole; ref-high is a reference model: untouched
    assert hidden.values.tolist() == [["m7", "high"]]
    assert split.heldout[(obs["model"] == "m7") & (obs["reasoning_state"] == "high")].all()
    with pytest.raises(ValueError, match="pinned states"):
        make_split("masked_state", obs, cfg, REFS)


def newer_panel() -> pd.DataFrame:
    """12 old models and 9 new ones (n0..n8, one with two states, one with a single cell), the high reference
    model among the new ones: the forward_thin study thins some of the new models and fits the others."""
    rows = []
    fams = ["a", "b", "c", "d", "e", "f"]
    dates = ({f"o{i}": f"2024-{i % 12 + 1:02d}-01" for i in range(12)} | {f"n{i}": f"2025-0{i + 1}-15" for i in range(9)}
             | {"ref-low": "2023-01-01", "ref-high": "2025-05-01"})
    for model, date in dates.items():
        states = ["default", "high"] if model in ("n3", "ref-high") else ["default"]
        for state in states:
            for f in (fams[:1] if model == "n8" else fams):
                rows.append({"model": model, "reasoning_state": state, "family": f, "u": 0.5, "released_on": date})
    return pd.DataFrame(rows)


def test_forward_thin_thins_a_seeded_share_of_the_new_models_and_keeps_the_others_in_the_refit(cfg):
    obs = newer_panel()
    cfg["forward"].update(newest_share=0.45, thin_share=0.5, thin_evidence_cells=2)
    _, new = release_cut(obs, 0.45)
    assert "ref-high" in new and "n8" in new and len(new) == 10
    split = make_split("forward_thin", obs, cfg, REFS)
    thinned, fitted = split.info["thinned_models"], split.info["fitted_new_models"]
    # a display reference model and a one-cell model cannot be thinned; of the other 8 new models, half are
    assert len(thinned) == 4 and not {"ref-high", "n8"} & set(thinned)
    assert sorted(thinned + fitted) == sorted(new)
    model = obs["model"]
    thin_rows, fitted_rows = model.isin(thinned).to_numpy(), model.isin(fitted).to_numpy()
    # thinned: the configured evidence cells, the rest held out (path calibrate_in), nothing in the refit
    per_model = obs.assign(e=split.evidence, h=split.heldout).groupby("model")[["e", "h"]].sum()
    assert (per_model.loc[thinned, "e"] == 2).all()
    assert (per_model.loc[thinned, "e"] + per_model.loc[thinned, "h"] == obs.groupby("model").size()[thinned]).all()
    assert not (split.train & thin_rows).any()
    assert set(split.path[split.heldout & thin_rows]) == {"calibrate_in"}
    # fitted new models: in the refit, each state keeps a cell, and their held-out cells are exactly forward's
    forward = make_split("forward", obs, cfg, REFS)
    assert (split.heldout[fitted_rows] == forward.heldout[fitted_rows]).all() and split.heldout[fitted_rows].any()
    assert set(split.path[split.heldout & fitted_rows]) == {"fit"}
    kept = obs[split.train].groupby(["model", "reasoning_state"]).size()
    for state in obs.loc[fitted_rows, ["model", "reasoning_state"]].drop_duplicates().itertuples(index=False):
        assert kept.get(tuple(state), 0) >= 1
    assert not (split.evidence & ~thin_rows).any()
    # the display references keep every cell, old models are untouched
    is_ref = obs[["model", "reasoning_state"]].apply(tuple, axis=1).isin(REFS).to_numpy()
    assert split.train[is_ref].all() and split.train[~model.isin(new).to_numpy()].all()
    # seeded; thin_share 1 thins every thinnable new model (the design before: no new model in the refit)
    assert make_split("forward_thin", obs, cfg, REFS).info == split.info
    cfg["forward"]["thin_share"] = 1.0
    everything = make_split("forward_thin", obs, cfg, REFS)
    assert len(everything.info["thinned_models"]) == 8 and set(everything.path[everything.heldout]) >= {"calibrate_in"}


def test_a_thinned_models_evidence_does_not_depend_on_which_others_are_thinned(cfg):
    obs = newer_panel()
    cfg["forward"].update(newest_share=0.45, thin_share=0.5)
    half = make_split("forward_thin", obs, cfg, REFS)
    cfg["forward"]["thin_share"] = 1.0
    everything = make_split("forward_thin", obs, cfg, REFS)
    thinned = obs["model"].isin(half.info["thinned_models"]).to_numpy()
    # the same evidence and held-out cells as in the all-thinned design: the two designs compare on identical cells
    assert (half.evidence[thinned] == everything.evidence[thinned]).all()
    assert (half.heldout[thinned] == everything.heldout[thinned]).all()


def test_a_fold_refit_is_always_warm_with_the_configured_metric():
    from atlas_assets.model.stan_data import load_model_config
    from atlas_assets.validation.folds import refit_config

    production = load_model_config()
    validation = load_validation_config(overrides={"refit": {"metric": "diag_e", "warmup": 150, "draws": 250}})
    refit = refit_config(production, validation, "masked_2")
    pcfg = refit["sampler"]["precondition"]
    assert pcfg["warm_max_new"] is None and pcfg["main_adapt"]["metric"] == "diag_e" and pcfg["main_warmup"] == 150
    assert pcfg["warm_place_max"] == 0
    # a fold's fit is a measurement used as it came out, not fitted again after failing its gates
    assert pcfg["refit_on_failure"] == 0 and production["sampler"]["precondition"]["refit_on_failure"] == 1
    # ... and it adapts its own step size, where the nightly refit keeps last night's
    assert pcfg["main_adapt"]["warm_fixed_step"] is None
    assert production["sampler"]["precondition"]["main_adapt"]["warm_fixed_step"]["burn_in"] == 25
    assert production["sampler"]["precondition"]["warm_max_new"] == 0          # the production config is untouched
    # the outputs' posterior predictive checks read the production fit's per-observation draws; a fold has no use
    assert refit["sampler"]["observation_draws"] is False and production["sampler"].get("observation_draws", True)
    assert refit["sampler"]["seed"] != refit_config(production, validation, "masked_3")["sampler"]["seed"]
    plain = refit_config(production, load_validation_config(overrides={"refit": {"metric": None}}), "masked_2")
    # without a configured metric a fold keeps the production one, still adapting its step size
    assert plain["sampler"]["precondition"]["main_adapt"] == {
        **production["sampler"]["precondition"]["main_adapt"], "warm_fixed_step": None}


@pytest.mark.parametrize("fold", ["forward", "forward_strict", "forward_thin", "masked_0", "masked_3", "masked_state"])
def test_the_split_follows_the_cells_not_the_order_of_the_rows(cfg, fold):
    # modeled_observations is read from DuckDB without an order: the same cells in another row order must give the
    # same split (on the real panel two runs of the same data once held out different forward cells: 224 of 388)
    obs = panel()
    pinned = {(m, "default") for m in obs["model"].unique()}
    shuffled = obs.sample(frac=1.0, random_state=3).reset_index(drop=True)
    named = []
    for frame in (obs, shuffled):
        split = make_split(fold, frame, cfg, REFS, pinned)
        keys = frame["model"] + "|" + frame["reasoning_state"] + "|" + frame["family"]
        named.append({part: sorted(keys[mask]) for part, mask in
                      (("heldout", split.heldout), ("dropped", split.dropped),
                       ("evidence", split.evidence if split.evidence is not None else np.zeros(len(frame), bool)))})
        assert split.fingerprint(frame) == make_split(fold, frame, cfg, REFS, pinned).fingerprint(frame)
    assert named[0] == named[1]
    assert named[0]["heldout"]
