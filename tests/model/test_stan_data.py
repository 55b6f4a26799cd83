"""Index maps, pinning and ladder contrasts of build_stan_data (hand-made frames)."""

import numpy as np
import pandas as pd
import pytest

from atlas_assets.model.stan_data import build_stan_data, load_model_config, orthogonal_contrasts


def frame(rows):
    cols = ["model", "reasoning_state", "family", "kind", "u", "correct", "items", "floor"]
    df = pd.DataFrame(rows, columns=cols)
    df["correct"] = df["correct"].astype("Int64")
    df["items"] = df["items"].astype("Int64")
    return df


@pytest.fixture
def panel():
    B, R = "bounded", "rating"
    return frame(
        [
            # model a: default + low + high + disabled (default pinned)
            ("a", "default", "gpqa", B, 0.5, 99, 198, 0.25),
            ("a", "default", "arc2", B, 0.0, None, None, 0.0),
            ("a", "low", "gpqa", B, 0.45, 89, 198, 0.25),
            ("a", "high", "gpqa", B, 0.6, 119, 198, 0.25),
            ("a", "high", "arena", R, 0.8, None, None, 0.0),
            ("a", "disabled", "gpqa", B, 0.3, 59, 198, 0.25),
            # model b: no default; high has most observations -> pinned
            ("b", "medium", "gpqa", B, 0.4, 79, 198, 0.25),
            ("b", "high", "gpqa", B, 0.7, 139, 198, 0.25),
            ("b", "high", "arc2", B, 1.0, None, None, 0.0),
            ("b", "high", "arena", R, -0.2, None, None, 0.0),
            ("b", "enabled", "arena", R, 0.1, None, None, 0.0),
            # models c, d, e: default only
            ("c", "default", "gpqa", B, 0.3, 59, 198, 0.25),
            ("c", "default", "arc2", B, 0.02, 2, 100, 0.0),
            ("d", "default", "gpqa", B, 0.35, 69, 198, 0.25),
            ("d", "default", "arena", R, -0.7, None, None, 0.0),
            ("e", "default", "arc2", B, 0.0, 0, 100, 0.0),
            ("e", "default", "arena", R, 0.0, None, None, 0.0),
        ]
    )


def test_contrasts_orthonormal():
    lin, quad = orthogonal_contrasts(6)
    assert abs(lin.sum()) < 1e-12 and abs(quad.sum()) < 1e-12
    assert abs(lin @ quad) < 1e-12
    assert np.isclose(lin @ lin, 1) and np.isclose(quad @ quad, 1)
    assert np.all(np.diff(lin) > 0)          # increasing along the ladder
    assert quad[0] > 0 and quad[-1] > 0       # convex


def test_index_maps_and_pinning(panel):
    si = build_stan_data(panel, load_model_config())
    d = si.data
    assert (d["N"], d["M"], d["S"], d["J"]) == (17, 5, 10, 3)
    assert si.models.model.tolist() == ["a", "b", "c", "d", "e"]
    assert si.families.family.tolist() == ["arc2", "arena", "gpqa"]
    # one pinned state per model: default where observed, else most-reported
    pinned = si.states.loc[si.states.pinned].set_index("model")["reasoning_state"].to_dict()
    assert pinned == {"a": "default", "b": "high", "c": "default", "d": "default", "e": "default"}
    # reference models: those with an observed default
    refs = [si.models.model[i - 1] for i in d["ref_model"]]
    assert refs == ["a", "c", "d", "e"] and d["M_ref"] == 4
    assert [si.models.model[i - 1] for i in d["free_model"]] == ["b"]
    # every observation points at its own state and family
    st = si.states.set_index("state_pos")
    for i, row in si.observations.iterrows():
        s = d["obs_state"][i] - 1
        assert (st.loc[s, "model"], st.loc[s, "reasoning_state"]) == (row.model, row.reasoning_state)
        assert si.families.family[d["obs_family"][i] - 1] == row.family
    # state -> model map
    assert [si.models.model[m - 1] for m in d["state_model"]] == st["model"].tolist()


def test_reasoning_structure(panel):
    si = build_stan_data(panel, load_model_config())
    d = si.data
    lin, quad = orthogonal_contrasts(6)
    st = si.states.set_index(["model", "reasoning_state"])
    # pinned states carry no per-model term
    for _, r in si.states.loc[si.states.pinned].iterrows():
        assert r.amp_index == 0 and r.dev_index == 0 and r.d_lin == 0 and r.d_quad == 0
    # model a (pinned default): ladder terms are the raw contrasts
    assert np.isclose(st.loc[("a", "low"), "d_lin"], lin[1])
    assert np.isclose(st.loc[("a", "high"), "d_quad"], quad[3])
    # model b (pinned high): contrasts measured from the high level
    assert np.isclose(st.loc[("b", "medium"), "d_lin"], lin[2] - lin[3])
    assert np.isclose(st.loc[("b", "medium"), "d_quad"], quad[2] - quad[3])
    assert st.loc[("a", "low"), "amp_index"] == st.loc[("a", "high"), "amp_index"] > 0
    assert d["A"] == 2
    # non-pinned off-ladder states get a free deviation with their setting's scale
    assert d["D"] == 2
    assert st.loc[("a", "disabled"), "dev_index"] > 0 and st.loc[("b", "enabled"), "dev_index"] > 0
    codes = dict(zip(si.states.reasoning_state, si.states.setting_code))
    assert codes["default"] == 0 and codes["minimal" if "minimal" in codes else "low"] >= 1
    assert codes["disabled"] == 7 and codes["enabled"] == 8
    dev_settings = {si.states.loc[si.states.dev_index == k, "reasoning_state"].item(): s
                    for k, s in enumerate(d["dev_setting"], start=1)}
    assert dev_settings == {"disabled": 1, "enabled": 2}


def test_likelihood_pieces(panel):
    si = build_stan_data(panel, load_model_config())
    d = si.data
    obs = si.observations
    piece = dict(zip(zip(obs.model, obs.reasoning_state, obs.family), obs.piece))
    assert piece[("a", "default", "arc2")] == "zero"       # continuous exact zero: hurdle
    assert piece[("e", "default", "arc2")] == "bbz"        # countable zero: zero-inflated BB
    assert piece[("b", "high", "arc2")] == "one"           # continuous exact one: censored
    assert piece[("c", "default", "arc2")] == "bb"
    assert piece[("a", "default", "gpqa")] == "bb"
    assert d["N_rt"] == 5 and d["N_zero"] == 1 and d["N_bbz"] == 1 and d["N_one"] == 1
    # hurdle survivors: non-zero bounded scores in floor-free families (arc2)
    assert sorted(obs.family[i - 1] for i in d["nz_idx"]) == ["arc2", "arc2"]
    # CSR averaging matrix rows sum to 1
    w, u = np.array(d["avg_w"]), d["avg_u"]
    sums = [w[u[j] - 1:u[j + 1] - 1].sum() for j in range(d["J"])]
    assert np.allclose(sums, 1)
    assert d["J_b"] == 2 and d["J_r"] == 1 and d["fam_rpos"] == [0, 1, 0]


def test_rejects_bad_input(panel):
    cfg = load_model_config()
    bad = panel.copy()
    bad.loc[0, "reasoning_state"] = "turbo"
    with pytest.raises(ValueError, match="unknown reasoning state"):
        build_stan_data(bad, cfg)
    dup = pd.concat([panel, panel.iloc[[0]]])
    with pytest.raises(ValueError, match="duplicate"):
        build_stan_data(dup, cfg)


def test_errors_name_the_row_and_the_field(panel):
    cfg = load_model_config()
    row = panel.iloc[3]
    key = f"{row.model}|{row.reasoning_state}|{row.family}"
    for field, value, problem in (
        ("reasoning_state", "turbo", "unknown reasoning state"),
        ("u", float("nan"), "missing or non-finite score"),
        ("u", float("inf"), "missing or non-finite score"),
        ("kind", "ordinal", "kind must be bounded or rating"),
    ):
        bad = panel.copy()
        bad[field] = bad[field].astype(object)
        bad.loc[3, field] = value
        label = key if field != "reasoning_state" else f"{row.model}|turbo|{row.family}"
        with pytest.raises(ValueError) as raised:
            build_stan_data(bad, cfg)
        message = str(raised.value)
        assert f"field {field!r}" in message and problem in message and f"row 4 ({label}" in message, message
    # A continuous exact zero in a family with a guessing floor is a refusal that should have been screened.
    zero_floor = panel.copy()
    zero_floor.loc[0, ["u", "correct", "items"]] = [0.0, pd.NA, pd.NA]
    with pytest.raises(ValueError, match="guessing floor"):
        build_stan_data(zero_floor, cfg)


def test_countable_zero_under_a_floor_is_an_ordinary_beta_binomial_outcome(panel):
    # 0.3% of 198 items rounds to 0 correct: in the beta-binomial's support, no hurdle involved.
    rounded = panel.copy()
    rounded.loc[0, ["u", "correct"]] = [0.003, 0]
    si = build_stan_data(rounded, load_model_config())
    piece = si.observations.set_index(["model", "reasoning_state", "family"])["piece"]
    assert piece[("a", "default", "gpqa")] == "bb"
    assert not si.observations.set_index(["model", "reasoning_state", "family"])["hurdle"][("a", "default", "gpqa")]
