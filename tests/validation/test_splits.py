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


def test_forward_thin_keeps_a_few_evidence_cells_per_new_model_outside_the_refit(cfg):
    obs = panel()
    split = make_split("forward_thin", obs, cfg, REFS)
    new = obs["model"].isin(["m6", "m7"]).to_numpy()
    assert split.evidence is not None and not (split.evidence & ~new).any() and not (split.heldout & ~new).any()
    per_model = obs.assign(e=split.evidence, h=split.heldout).groupby("model")[["e", "h"]].sum()
    assert per_model.loc[["m6", "m7"], "e"].tolist() == [2, 2]
    assert (per_model.loc[["m6", "m7"], "e"] + per_model.loc[["m6", "m7"], "h"]).tolist() == [6, 11]
    # the new models leave the refit entirely: neither their evidence nor their held-out cells are trained on
    assert not (split.train & new).any()
